/**
 * The creature server as an Apollo Federation v2 subgraph: a real gateway (`@apollo/gateway` in Apollo
 * Server) composes it with a second small subgraph started here (trainers, built with
 * `@apollo/subgraph` and served by graphql-http) and resolves queries that need both.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { ApolloGateway, IntrospectAndCompose } from '@apollo/gateway';
import { ApolloServer } from '@apollo/server';
import { buildSubgraphSchema } from '@apollo/subgraph';
import { parse } from 'graphql';
import { createHandler } from 'graphql-http/lib/use/http';
import { type Running, start } from './helpers.ts';

// biome-ignore lint/suspicious/noExplicitAny: results are inspected field by field
type Json = any;

const TRAINERS = [
  { id: 'ash', name: 'Ash', partner: '025' },
  { id: 'misty', name: 'Misty', partner: '121' },
  { id: 'brock', name: 'Brock', partner: '095' },
];

/** The trainers subgraph: `Trainer` entities whose partner is a `Creature` of the creature subgraph. */
function trainersSchema() {
  return buildSubgraphSchema([
    {
      typeDefs: parse(`
        extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
        type Trainer @key(fields: "id") { id: ID! name: String! partner: Creature! }
        type Creature @key(fields: "id") { id: ID! trainers: [Trainer!]! }
        type Query { trainer(id: ID!): Trainer }
      `),
      resolvers: {
        Query: { trainer: (_: unknown, { id }: { id: string }) => TRAINERS.find((t) => t.id === id) ?? null },
        Trainer: { partner: (t: { partner: string }) => ({ id: t.partner }) },
        Creature: {
          __resolveReference: (ref: { id: string }) => ({ id: ref.id }),
          trainers: (c: { id: string }) => TRAINERS.filter((t) => t.partner === c.id),
        },
        // biome-ignore lint/suspicious/noExplicitAny: @apollo/subgraph's resolver map is loosely typed
      } as any,
    },
  ]);
}

describe('Apollo Federation', () => {
  let creatures: Running;
  let trainers: Server;
  let gateway: ApolloServer;
  const seen: string[] = [];

  before(async () => {
    creatures = await start();
    creatures.server.httpServer.prependListener('request', (req) => {
      if (req.method === 'POST') seen.push(req.url ?? '');
    });
    const handler = createHandler({ schema: trainersSchema() });
    trainers = createServer(handler);
    await new Promise<void>((resolve) => trainers.listen(0, '127.0.0.1', resolve));
    const { port } = trainers.address() as AddressInfo;
    gateway = new ApolloServer({
      gateway: new ApolloGateway({
        supergraphSdl: new IntrospectAndCompose({
          subgraphs: [
            { name: 'creatures', url: creatures.endpoint },
            { name: 'trainers', url: `http://127.0.0.1:${port}/graphql` },
          ],
        }),
      }),
    });
    await gateway.start();
  });
  after(async () => {
    await gateway?.stop();
    await new Promise((resolve) => trainers?.close(resolve));
    await creatures?.server.close();
  });

  const run = async (query: string) => {
    const response = await gateway.executeOperation({ query });
    assert.equal(response.body.kind, 'single');
    const result = (response.body as { singleResult: { data?: Json; errors?: Json[] } }).singleResult;
    assert.equal(result.errors, undefined, JSON.stringify(result.errors));
    // The gateway builds objects without prototypes: compare their JSON form.
    return JSON.parse(JSON.stringify(result.data));
  };

  test('the subgraph answers _service { sdl } with its @key entities', async () => {
    const { body } = await creatures.gql('{ _service { sdl } }');
    const sdl = (body.data as Json)._service.sdl as string;
    assert.match(sdl, /@link\(url: "https:\/\/specs\.apollo\.dev\/federation\/v2\.3"/);
    assert.match(sdl, /type Creature implements Node\s+@key\(fields: "id"\)/);
  });

  test('the gateway resolves a trainer (trainers subgraph) with its partner creature (creature subgraph)', async () => {
    seen.length = 0;
    const data = await run(
      '{ trainer(id: "ash") { name partner { id name number types evolutions { name } } } }',
    );
    assert.deepEqual(data, {
      trainer: {
        name: 'Ash',
        partner: {
          id: '025',
          name: 'Pikachu',
          number: 25,
          types: ['Electric'],
          evolutions: [{ name: 'Raichu' }],
        },
      },
    });
    assert.ok(seen.length > 0, 'the creature subgraph was asked for the partner');
  });

  test('the gateway resolves creatures (creature subgraph) with their trainers (trainers subgraph)', async () => {
    const data = await run('{ creatures(first: 25) { name trainers { name } } }');
    const withTrainers = data.creatures.filter((c: Json) => c.trainers.length > 0);
    assert.deepEqual(withTrainers, [{ name: 'Pikachu', trainers: [{ name: 'Ash' }] }]);
    const starmie = await run(
      '{ creature(name: "Starmie") { name maxCP trainers { name partner { name } } } }',
    );
    assert.equal(starmie.creature.trainers[0].name, 'Misty');
    assert.equal(starmie.creature.trainers[0].partner.name, 'Starmie');
  });

  test('_entities takes at most 100 representations', async () => {
    const representations = Array.from({ length: 101 }, () => ({ __typename: 'Creature', id: '001' }));
    const { body } = await creatures.gql(
      'query ($r: [_Any!]!) { _entities(representations: $r) { ... on Creature { id } } }',
      { r: representations },
    );
    assert.equal(body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
  });
});
