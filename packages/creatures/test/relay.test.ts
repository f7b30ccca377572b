/**
 * Relay's object identification and connections: the `Node` interface (`Query.node`, `Query.nodes`),
 * relay-compiler accepting a `@refetchable` fragment on `Creature` against the server's schema, the
 * refetch query it generates run against the server, and `creaturesConnection` paged forward and backward
 * by the GraphQL Cursor Connections Specification.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { printSchema } from 'graphql';
import { type Running, start } from './helpers.ts';

const require = createRequire(import.meta.url);
const RELAY_COMPILER = join(dirname(require.resolve('relay-compiler/package.json')), 'cli.js');

// biome-ignore lint/suspicious/noExplicitAny: results are inspected field by field
type Json = any;

describe('Relay', () => {
  let s: Running;
  let dir: string;
  before(async () => {
    s = await start();
    dir = mkdtempSync(join(tmpdir(), 'creatures-relay-'));
  });
  after(async () => {
    await s.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('relay-compiler accepts a @refetchable fragment on Creature, and its refetch query runs through node(id:)', async () => {
    writeFileSync(join(dir, 'schema.graphql'), printSchema(s.server.schema));
    mkdirSync(join(dir, 'src', '__generated__'), { recursive: true });
    writeFileSync(
      join(dir, 'src', 'CreatureCard.ts'),
      `import { graphql } from 'relay-runtime';
export const fragment = graphql\`
  fragment CreatureCard_creature on Creature @refetchable(queryName: "CreatureCardRefetchQuery") {
    id
    name
    maxCP
  }
\`;
export const query = graphql\`
  query CreatureCardQuery($name: String!) {
    creature(name: $name) { ...CreatureCard_creature }
    creaturesConnection(first: 2) { edges { cursor node { id ...CreatureCard_creature } } }
  }
\`;
`,
    );
    writeFileSync(
      join(dir, 'relay.config.json'),
      JSON.stringify({
        src: './src',
        schema: './schema.graphql',
        language: 'typescript',
        artifactDirectory: './src/__generated__',
      }),
    );
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [RELAY_COMPILER], {
      cwd: dir,
    }).catch((err: { stdout: string; stderr: string }) => {
      assert.fail(`relay-compiler failed:\n${err.stdout}\n${err.stderr}`);
    });
    assert.doesNotMatch(`${stdout}${stderr}`, /error/i);
    const artifact = readFileSync(
      join(dir, 'src', '__generated__', 'CreatureCardRefetchQuery.graphql.ts'),
      'utf8',
    );
    const text = /"text": "((?:[^"\\]|\\.)*)"/.exec(artifact)?.[1];
    assert.ok(text, 'the refetch query artifact carries its text');
    const refetch = JSON.parse(`"${text}"`) as string;
    assert.match(refetch, /node\(id: \$id\)/);
    const { status, body } = await s.gql(refetch, { id: '025' });
    assert.equal(status, 200);
    assert.equal((body.data as Json).node.name, 'Pikachu');
    assert.equal((body.data as Json).node.id, '025');
  });

  test('node(id:) and nodes(ids:) fetch creatures and messages by their global ids', async () => {
    const created = await s.gql(
      'mutation { createMessage(input: { content: "by node", author: "relay" }) { id } }',
    );
    const messageId = (created.body.data as Json).createMessage.id as string;
    const tutorialId = Buffer.from('Pokemon:151').toString('base64');
    const { body } = await s.gql(
      `query ($m: ID!, $t: ID!) {
        creature: node(id: "025") { __typename id ... on Creature { name } }
        message: node(id: $m) { __typename id ... on Message { content } }
        tutorial: node(id: $t) { id }
        none: node(id: "999") { id }
        nodes(ids: ["001", $m, "nope"]) { __typename id }
      }`,
      { m: messageId, t: tutorialId },
    );
    assert.deepEqual(body.data, {
      creature: { __typename: 'Creature', id: '025', name: 'Pikachu' },
      message: { __typename: 'Message', id: messageId, content: 'by node' },
      tutorial: { id: '151' },
      none: null,
      nodes: [{ __typename: 'Creature', id: '001' }, { __typename: 'Message', id: messageId }, null],
    });
    const tooMany = await s.gql('query ($ids: [ID!]!) { nodes(ids: $ids) { id } }', {
      ids: Array.from({ length: 101 }, (_, i) => String(i + 1)),
    });
    assert.equal(tooMany.body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
    assert.match(tooMany.body.errors![0]!.message, /at most 100 ids/);
  });

  test('creaturesConnection pages forward with first/after and backward with last/before', async () => {
    const page = async (args: string) =>
      (
        await s.gql(
          `{ creaturesConnection(${args}) { totalCount edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`,
        )
      ).body.data.creaturesConnection as Json;
    const forward: string[] = [];
    let after: string | null = null;
    for (;;) {
      const p = await page(`first: 40${after ? `, after: "${after}"` : ''}`);
      forward.push(...p.edges.map((e: Json) => e.node.id));
      assert.equal(p.pageInfo.hasPreviousPage, after !== null);
      if (!p.pageInfo.hasNextPage) break;
      after = p.pageInfo.endCursor;
    }
    const backward: string[] = [];
    let before: string | null = null;
    for (;;) {
      const p = await page(`last: 40${before ? `, before: "${before}"` : ''}`);
      backward.unshift(...p.edges.map((e: Json) => e.node.id));
      assert.equal(p.pageInfo.hasNextPage, before !== null);
      if (!p.pageInfo.hasPreviousPage) break;
      before = p.pageInfo.startCursor;
    }
    assert.equal(forward.length, 151);
    assert.deepEqual(backward, forward);
    const lastThree = await page('last: 3');
    assert.deepEqual(
      lastThree.edges.map((e: Json) => e.node.id),
      ['149', '150', '151'],
    );
    assert.deepEqual([lastThree.pageInfo.hasPreviousPage, lastThree.pageInfo.hasNextPage], [true, false]);
    const between = await page(
      `after: "${lastThree.edges[0].cursor}", before: "${lastThree.edges[2].cursor}"`,
    );
    assert.deepEqual(
      between.edges.map((e: Json) => e.node.id),
      ['150'],
    );
    const bad = await s.gql('{ creaturesConnection(last: -1) { totalCount } }');
    assert.equal(bad.body.errors?.[0]?.extensions?.code, 'BAD_USER_INPUT');
    assert.match(bad.body.errors![0]!.message, /last:\) must be between 0 and 500/);
  });
});
