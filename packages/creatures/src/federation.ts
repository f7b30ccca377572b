/**
 * The creature schema as an Apollo Federation v2 subgraph (https://www.apollographql.com/docs/graphos/reference/federation/subgraph-spec),
 * built by `@apollo/subgraph`'s `buildSubgraphSchema`: the SDL of `schema.ts` with
 * `extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])` and
 * `@key(fields: "id")` on `Creature` and `Message`, which adds `Query._service { sdl }` (the subgraph's
 * SDL, for a gateway to compose) and `Query._entities(representations:)` (entities by key, resolved by
 * each type's reference resolver: `Store.findCreature`, `Store.getMessage`). A request names at most
 * {@link MAX_NODES} representations (else `BAD_USER_INPUT`), and the cost model counts them like the
 * ids of `Query.nodes`.
 */
import { buildSubgraphSchema } from '@apollo/subgraph';
import {
  type ConstDirectiveNode,
  type DocumentNode,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  Kind,
  parse,
  visit,
} from 'graphql';
import { badUserInput } from './errors.ts';
import { MAX_NODES } from './listing.ts';
import { type ResolverContext, resolveNodeType, resolvers, typeDefs } from './schema.ts';
import type { Creature, Message } from './store.ts';

/** The Federation version the subgraph links. */
export const FEDERATION_URL = 'https://specs.apollo.dev/federation/v2.3';

const KEY: ConstDirectiveNode = {
  kind: Kind.DIRECTIVE,
  name: { kind: Kind.NAME, value: 'key' },
  arguments: [
    {
      kind: Kind.ARGUMENT,
      name: { kind: Kind.NAME, value: 'fields' },
      value: { kind: Kind.STRING, value: 'id' },
    },
  ],
};

/** {@link typeDefs} with the Federation `@link` and `@key(fields: "id")` on `Creature` and `Message`. */
export function subgraphTypeDefs(): DocumentNode {
  const document = parse(`extend schema @link(url: "${FEDERATION_URL}", import: ["@key"])\n${typeDefs}`);
  return visit(document, {
    ObjectTypeDefinition(node) {
      if (node.name.value !== 'Creature' && node.name.value !== 'Message') return undefined;
      return { ...node, directives: [...(node.directives ?? []), KEY] };
    },
  });
}

/**
 * Builds the executable subgraph schema: the creature schema's types and resolvers plus `_service` and
 * `_entities`. Throws `@apollo/subgraph`'s errors for an invalid subgraph SDL.
 */
export function buildFederatedSchema(): GraphQLSchema {
  const schema = buildSubgraphSchema([
    {
      typeDefs: subgraphTypeDefs(),
      resolvers: {
        ...resolvers,
        Node: { __resolveType: resolveNodeType },
        Creature: {
          ...resolvers.Creature,
          __resolveReference: (reference: { id: string }, { store }: ResolverContext): Creature | null =>
            store.findCreature(reference.id) ?? null,
        },
        Message: {
          __resolveReference: async (
            reference: { id: string },
            { store }: ResolverContext,
          ): Promise<Message | null> => (await store.getMessage(reference.id)) ?? null,
        },
        // biome-ignore lint/suspicious/noExplicitAny: @apollo/subgraph's resolver map is loosely typed
      } as any,
    },
  ]);
  const entities = schema.getQueryType()?.getFields()._entities;
  if (entities?.resolve) {
    const resolve = entities.resolve as GraphQLFieldResolver<
      unknown,
      unknown,
      { representations: unknown[] }
    >;
    entities.resolve = (root, args, context, info) => {
      if (args.representations.length > MAX_NODES) {
        throw badUserInput(
          `_entities(representations:) takes at most ${MAX_NODES} representations, got ${args.representations.length}`,
        );
      }
      return resolve(root, args, context, info);
    };
  }
  return schema;
}
