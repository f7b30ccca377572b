/**
 * The creature server's GraphQL schema (SDL) and its resolvers, in one module as spec 000 ("What the
 * service does") asks: the schema states the data model, and each resolver is named after the field of
 * `type Query` / `type Mutation` it resolves. Extend the server by adding SDL here and a resolver of the
 * same name below.
 */
import { buildSchema, type GraphQLFieldResolver, type GraphQLSchema } from 'graphql';
import { creatureNumber, imagePath } from './art.ts';
import { badUserInput, creatureError } from './errors.ts';
import {
  type CreatureOrder,
  checkFirst,
  DEFAULT_CONNECTION_PAGE,
  MAX_NODES,
  MAX_PAGE_SIZE,
  type PageArgs,
  pageOf,
  selectCreatures,
} from './listing.ts';
import type {
  Awaitable,
  Creature,
  CreatureDraft,
  CreaturePatch,
  Message,
  MessageDraft,
  Store,
} from './store.ts';
import { CreatureStoreError } from './store-error.ts';

export { MAX_NODES, MAX_PAGE_SIZE };

/**
 * The fields of `CreatureInput` and `CreatureUpdateInput` besides `name` (required in the one, optional in
 * the other), written once for both.
 */
const CREATURE_INPUT_FIELDS = `  classification: String
  types: [String!]
  resistant: [String!]
  weaknesses: [String!]
  weight: DimensionInput
  height: DimensionInput
  fleeRate: Float
  maxCP: Int
  maxHP: Int
  attacks: AttacksInput
  evolutionIds: [ID!]
  evolutionRequirements: EvolutionRequirementInput
  previousEvolutionIds: [ID!]
`;

/** The schema in GraphQL SDL (spec 000 "Resources and their fields" and "Operations"). */
export const typeDefs = /* GraphQL */ `
"""
An object with a global id (GraphQL Global Object Identification, as Relay uses it): the id is unique
across every type of this schema, and Query.node(id:) fetches the object again by it.
"""
interface Node {
  "Unique across every type: a creature's id is digits (\\"025\\"), a message's a UUID."
  id: ID!
}

"""
A creature: one of the 151 of the first generation (ids "001".."151", seeded from the data file) or one
added with createCreature.
"""
type Creature implements Node {
  "Identifier: three digits for the first generation (\\"025\\"), the next number for created ones."
  id: ID!
  "The creature's number: its id as a number (id \\"025\\" is number 25)."
  number: Int!
  "Name, unique regardless of case."
  name: String!
  """
  Path of the creature's picture on this server ("/images/creatures/25.svg"): an SVG drawn from its
  types and name, served with a day's Cache-Control and an ETag. Null for a creature without a number.
  """
  image: String
  "Species category, e.g. \\"Mouse Pokémon\\"."
  classification: String
  "Elemental types, e.g. [\\"Electric\\"]."
  types: [String!]!
  "Attacking types that deal less than normal damage to this creature."
  resistant: [String!]!
  "Attacking types that deal more than normal damage to this creature."
  weaknesses: [String!]!
  "Weight range with unit, e.g. {minimum: \\"5.25kg\\", maximum: \\"6.75kg\\"}."
  weight: Dimension
  "Height range with unit, e.g. {minimum: \\"0.35m\\", maximum: \\"0.45m\\"}."
  height: Dimension
  "Chance (0..1) that the creature flees an encounter; null when unknown."
  fleeRate: Float
  "Maximum combat power."
  maxCP: Int
  "Maximum hit points."
  maxHP: Int
  "Fast and special attacks."
  attacks: Attacks!
  "Every later evolution stage, nearest first."
  evolutions: [Creature!]!
  "What it takes to evolve; null for a final stage."
  evolutionRequirements: EvolutionRequirement
  "Every earlier evolution stage, earliest first."
  previousEvolutions: [Creature!]!
}

"A range of a measure; both ends carry their unit (\\"kg\\", \\"m\\")."
type Dimension {
  minimum: String
  maximum: String
}

"The attacks of a creature."
type Attacks {
  fast: [Attack!]!
  special: [Attack!]!
}

"One attack."
type Attack {
  name: String!
  "Elemental type of the attack."
  type: String!
  "Base damage (power)."
  damage: Int!
}

"What it takes to evolve, e.g. {amount: 50, name: \\"Pikachu candies\\"}."
type EvolutionRequirement {
  amount: Int!
  name: String!
}

"A message (the spec's example of extending the schema with mutations)."
type Message implements Node {
  "A UUID."
  id: ID!
  content: String
  author: String
}

"Fields of a message to create or update."
input MessageInput {
  content: String
  author: String
}

"A range of a measure, both ends with their unit."
input DimensionInput {
  minimum: String
  maximum: String
}

"One attack."
input AttackInput {
  name: String!
  type: String!
  damage: Int!
}

"Fast and special attacks."
input AttacksInput {
  fast: [AttackInput!]
  special: [AttackInput!]
}

"What it takes to evolve."
input EvolutionRequirementInput {
  amount: Int!
  name: String!
}

"A new creature. Only name is required; evolutionIds/previousEvolutionIds name existing creatures."
input CreatureInput {
  name: String!
${CREATURE_INPUT_FIELDS}}

"Changes to a creature: given fields replace the stored ones, omitted fields stay as they are."
input CreatureUpdateInput {
  name: String
${CREATURE_INPUT_FIELDS}}

"What the creature list can be ordered by."
enum CreatureOrderField {
  "The number (id order)."
  NUMBER
  "The name, case-insensitively."
  NAME
  "Maximum combat power; creatures without one come last."
  MAX_CP
  "Maximum hit points; creatures without one come last."
  MAX_HP
}

"Sort direction."
enum OrderDirection {
  ASC
  DESC
}

"An order of the creature list; ties are broken by number."
input CreatureOrder {
  field: CreatureOrderField! = NUMBER
  direction: OrderDirection! = ASC
}

"A page of creatures (GraphQL Cursor Connections Specification)."
type CreatureConnection {
  "How many creatures match the search and type, over all pages."
  totalCount: Int!
  edges: [CreatureEdge!]!
  "The creatures of this page (the edges' nodes)."
  nodes: [Creature!]!
  pageInfo: PageInfo!
}

"A creature and its cursor."
type CreatureEdge {
  "Opaque; pass it as after: to get the creatures after this one."
  cursor: String!
  node: Creature!
}

"Where a page is in its list."
type PageInfo {
  hasNextPage: Boolean!
  hasPreviousPage: Boolean!
  startCursor: String
  endCursor: String
}

type Query {
  """
  The creatures, in number (id) order unless orderBy says otherwise. Optional filtering: type keeps
  creatures of that type (any case), search keeps names containing the text (any case, accents and
  punctuation ignored); after (a creature id) or offset skips; first (0..${MAX_PAGE_SIZE}) limits the page.
  """
  creatures(
    first: Int
    after: ID
    offset: Int
    type: String
    search: String
    orderBy: CreatureOrder
  ): [Creature!]!
  """
  The creatures as a connection with a total count (GraphQL Cursor Connections Specification): the same
  type, search and orderBy as creatures; after and before (edges' cursors) bound the list, then first
  (0..${MAX_PAGE_SIZE}) keeps its first items and last (0..${MAX_PAGE_SIZE}) its last ones; without
  either, the first ${DEFAULT_CONNECTION_PAGE}.
  """
  creaturesConnection(
    first: Int
    after: String
    last: Int
    before: String
    search: String
    orderBy: CreatureOrder
    type: String
  ): CreatureConnection!
  "The object with this global id (Node.id; a creature also by its number or tutorial global id); null when there is none."
  node(id: ID!): Node
  "The objects with these global ids, in order (null where there is none); at most ${MAX_NODES} ids."
  nodes(ids: [ID!]!): [Node]!
  """
  One creature by name or by id; null when there is none. A name matches in any case, and by its
  alias form (accents, punctuation and spaces ignored, ♀/♂ as F/M: "Nidoran-F", "Mr Mime"). An id is
  the stored id ("025"), the number ("25") or the original tutorial's global id (base64 of
  "Pokemon:025"); a String variable is accepted here as well as an ID one.
  """
  creature(name: String, id: ID): Creature
  "One message by id; null when there is none."
  getMessage(id: ID!): Message
}

type Mutation {
  "Stores a new message and returns it with its generated id."
  createMessage(input: MessageInput): Message
  "Replaces the given fields of a message; null with a NOT_FOUND error for an unknown id."
  updateMessage(id: ID!, input: MessageInput): Message
  "Adds a creature; errors with BAD_USER_INPUT for a taken name or an unknown evolution id."
  createCreature(input: CreatureInput!): Creature!
  "Changes a creature; errors with NOT_FOUND for an unknown id."
  updateCreature(id: ID!, input: CreatureUpdateInput!): Creature!
  "Removes a creature and returns it as it was; errors with NOT_FOUND for an unknown id."
  deleteCreature(id: ID!): Creature!
}
`;

/** The context every resolver receives: the store the server was created with. */
export type ResolverContext = {
  store: Store;
};

type Resolver<Args = Record<string, unknown>, Parent = unknown> = GraphQLFieldResolver<
  Parent,
  ResolverContext,
  Args
>;

/** `err` as the client sees it: a {@link CreatureStoreError} as a `GraphQLError` with its code; else `err`. */
function asGraphQLError(err: unknown): never {
  if (err instanceof CreatureStoreError) throw creatureError(err.message, err.code);
  throw err;
}

/** The result of a store write, a refusal ({@link CreatureStoreError}) thrown as a `GraphQLError` with its code. */
function write<T>(run: () => Awaitable<T>): Awaitable<T> {
  try {
    const result = run();
    return result instanceof Promise ? result.catch(asGraphQLError) : result;
  } catch (err) {
    return asGraphQLError(err);
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The object a global id names (`Query.node`): a message for a UUID, else the creature that
 * `Store.findCreature` finds (stored id, number, tutorial global id); null when there is none.
 */
function nodeById(store: Store, id: string): Creature | Message | null | Promise<Message | null> {
  if (UUID.test(id)) {
    const message = store.getMessage(id);
    return message instanceof Promise ? message.then((m) => m ?? null) : (message ?? null);
  }
  return store.findCreature(id) ?? null;
}

/** The concrete type of a `Node` value: messages have `content`, creatures do not. */
export function resolveNodeType(value: unknown): 'Message' | 'Creature' {
  return typeof value === 'object' && value !== null && 'content' in value ? 'Message' : 'Creature';
}

interface CreaturesArgs extends PageArgs {
  offset?: number | null;
  type?: string | null;
  search?: string | null;
  orderBy?: CreatureOrder | null;
}

/**
 * The resolvers, keyed by type then field name (`resolvers.Query.creature` resolves `Query.creature`).
 * Every write goes through the {@link Store}, which emits the change events.
 */
export const resolvers = {
  Query: {
    creatures: ((_root, args, { store }) => {
      const { first, after, offset } = args;
      checkFirst('creatures', first);
      if (offset != null && offset < 0)
        throw badUserInput(`creatures(offset:) must be 0 or more, got ${offset}`);
      if (after != null && offset != null)
        throw badUserInput('creatures takes either after or offset, not both');
      const list = selectCreatures(store.listCreatures(), args);
      let start = offset ?? 0;
      if (after != null) {
        const index = list.findIndex((c) => c.id === after);
        if (index < 0) throw badUserInput(`creatures(after:) names no creature in this list: "${after}"`);
        start = index + 1;
      }
      return list.slice(start, first == null ? undefined : start + first);
    }) as Resolver<CreaturesArgs>,
    creaturesConnection: ((_root, args, { store }) =>
      pageOf(selectCreatures(store.listCreatures(), args), args)) as Resolver<CreaturesArgs>,
    node: ((_root, { id }, { store }) => nodeById(store, id)) as Resolver<{ id: string }>,
    nodes: ((_root, { ids }, { store }) => {
      if (ids.length > MAX_NODES)
        throw badUserInput(`nodes(ids:) takes at most ${MAX_NODES} ids, got ${ids.length}`);
      return ids.map((id) => nodeById(store, id));
    }) as Resolver<{ ids: string[] }>,
    creature: ((_root, { name, id }, { store }) => {
      if (name == null && id == null) throw badUserInput('creature needs a name or an id argument');
      const byName = name == null ? undefined : store.getCreatureByName(name);
      const byId = id == null ? undefined : store.findCreature(id);
      if (name != null && id != null) return byName && byName === byId ? byName : null;
      return byName ?? byId ?? null;
    }) as Resolver<{ name?: string | null; id?: string | null }>,
    getMessage: ((_root, { id }, { store }) => store.getMessage(id) ?? null) as Resolver<{ id: string }>,
  },
  Mutation: {
    createMessage: ((_root, { input }, { store }) =>
      write(() => store.createMessage(input ?? {}))) as Resolver<{
      input?: MessageDraft | null;
    }>,
    updateMessage: ((_root, { id, input }, { store }) =>
      write(() => store.updateMessage(id, input ?? {}))) as Resolver<{
      id: string;
      input?: MessageDraft | null;
    }>,
    createCreature: ((_root, { input }, { store }) => write(() => store.createCreature(input))) as Resolver<{
      input: CreatureDraft;
    }>,
    updateCreature: ((_root, { id, input }, { store }) =>
      write(() => store.updateCreature(id, input))) as Resolver<{
      id: string;
      input: CreaturePatch;
    }>,
    deleteCreature: ((_root, { id }, { store }) => write(() => store.deleteCreature(id))) as Resolver<{
      id: string;
    }>,
  },
  Creature: {
    number: ((creature) => creatureNumber(creature)) as Resolver<Record<string, never>, Creature>,
    image: ((creature) => imagePath(creature)) as Resolver<Record<string, never>, Creature>,
    evolutions: ((creature, _args, { store }) => store.resolveRefs(creature.evolutions)) as Resolver<
      Record<string, never>,
      Creature
    >,
    previousEvolutions: ((creature, _args, { store }) =>
      store.resolveRefs(creature.previousEvolutions)) as Resolver<Record<string, never>, Creature>,
  },
};

/**
 * Attaches `map` (resolvers keyed by type, then field, as {@link resolvers}) to the fields of `schema`, and
 * the `Node` interface's type resolver. `schema` is one built from {@link typeDefs} by graphql-js 16 (the
 * engine) or 17 (incremental delivery): only `getType`, `getFields` and `resolve` are used, so it is
 * typed by that shape. Throws `Error` naming the type or field when `map` names one the SDL does not declare.
 */
export function attachResolvers(
  schema: { getType(name: string): unknown },
  map: Record<string, Record<string, unknown>>,
): void {
  const node = schema.getType('Node') as object | null | undefined;
  if (node && 'resolveType' in node) node.resolveType = resolveNodeType;
  for (const [typeName, fields] of Object.entries(map)) {
    const type = schema.getType(typeName) as object | null | undefined;
    if (!type || !('getFields' in type)) throw new Error(`resolvers name an unknown type ${typeName}`);
    const defined = (type as { getFields(): Record<string, object | undefined> }).getFields();
    for (const [fieldName, resolve] of Object.entries(fields)) {
      const field = defined[fieldName];
      if (!field || !('resolve' in field))
        throw new Error(`resolvers name an unknown field ${typeName}.${fieldName}`);
      field.resolve = resolve;
    }
  }
}

/**
 * Builds the executable schema: {@link typeDefs} with {@link resolvers} attached to their fields
 * ({@link attachResolvers}). Throws if a resolver names a type or field the SDL does not declare.
 */
export function buildCreatureSchema(): GraphQLSchema {
  const schema = buildSchema(typeDefs);
  attachResolvers(schema, resolvers);
  return schema;
}

/** The executable schema of the creature server (built once at import). */
export const schema: GraphQLSchema = buildCreatureSchema();
