/**
 * The front end's GraphQL client and operations. Every query and mutation goes to `/graphql` (spec 000,
 * "Clients (including a frontend) send every query and every mutation to the single endpoint"); subscriptions
 * go to the same endpoint as GraphQL-over-SSE event streams (`Accept: text/event-stream`).
 */
import { Client, CombinedError, cacheExchange, fetchExchange, subscriptionExchange } from '@urql/core';
import { initGraphQLTada, type ResultOf, type VariablesOf } from 'gql.tada';
import { createClient as createSseClient } from 'graphql-sse';
import type { introspection } from './graphql-env.ts';

/** The GraphQL endpoint, relative to the page's origin. */
export const GRAPHQL_PATH = '/graphql';

/** State of the live-update connection: first connect, connected, or reconnecting after a failure. */
export type LiveStatus = 'connecting' | 'live' | 'reconnecting';

let liveStatus: LiveStatus = 'connecting';
const liveListeners = new Set<() => void>();

function setLiveStatus(status: LiveStatus): void {
  if (status === liveStatus) return;
  liveStatus = status;
  for (const listener of liveListeners) listener();
}

/** Subscribes to {@link LiveStatus} changes (for `useSyncExternalStore`); returns the unsubscribe. */
export function onLiveStatus(listener: () => void): () => void {
  liveListeners.add(listener);
  return () => liveListeners.delete(listener);
}

/** The current {@link LiveStatus}. */
export function getLiveStatus(): LiveStatus {
  return liveStatus;
}

/** Waits before reconnect number `retries` (0-based): 1, 2, 4, 8 s then every 10 s, plus up to 1 s jitter. */
function backoff(retries: number): Promise<void> {
  const ms = Math.min(1000 * 2 ** retries, 10_000) + Math.random() * 1000;
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Creates the urql client: document cache, fetch for queries and mutations (JSON POST or GET within URL
 * limits), and graphql-sse for subscriptions ("distinct connections" mode: one event stream per
 * subscription), which reconnects after network failures and reports its {@link LiveStatus}.
 */
export function createGraphQLClient(): Client {
  const sse = createSseClient({
    url: GRAPHQL_PATH,
    retryAttempts: Number.MAX_SAFE_INTEGER,
    retry: backoff,
    on: {
      connecting: (reconnecting) => setLiveStatus(reconnecting ? 'reconnecting' : 'connecting'),
      connected: () => setLiveStatus('live'),
    },
  });
  return new Client({
    url: GRAPHQL_PATH,
    exchanges: [
      cacheExchange,
      fetchExchange,
      subscriptionExchange({
        forwardSubscription(request) {
          return {
            subscribe(sink) {
              const dispose = sse.subscribe({ ...request, query: request.query ?? '' }, sink);
              return { unsubscribe: dispose };
            },
          };
        },
      }),
    ],
  });
}

/**
 * The `graphql` tag of the front end: gql.tada types each document's result and variables from the
 * server's schema (`graphql-env.ts`, written by `scripts/web-schema.ts` from `src/schema.ts`; a test
 * fails when it is stale), so no type below is written by hand. Fragments are not masked: a query's
 * result holds the fields of the fragments it spreads.
 */
const graphql = initGraphQLTada<{
  introspection: typeof introspection;
  disableMasking: true;
  scalars: { ID: string };
}>();

const SUMMARY = graphql(`
  fragment CreatureSummary on Creature {
    id
    number
    name
    image
    classification
    types
    maxCP
  }
`);

const DETAIL = graphql(
  `
  fragment CreatureDetail on Creature {
    ...CreatureSummary
    resistant
    weaknesses
    weight {
      minimum
      maximum
    }
    height {
      minimum
      maximum
    }
    fleeRate
    maxHP
    attacks {
      fast {
        name
        type
        damage
      }
      special {
        name
        type
        damage
      }
    }
    evolutions {
      id
      name
    }
    previousEvolutions {
      id
      name
    }
    evolutionRequirements {
      amount
      name
    }
  }
`,
  [SUMMARY],
);

const MESSAGE = graphql(`
  fragment MessageFields on Message {
    id
    content
    author
  }
`);

/** A row of the creature list (fragment `CreatureSummary`). */
export type CreatureSummary = ResultOf<typeof SUMMARY>;

/** Everything the detail view shows of one creature (fragment `CreatureDetail`). */
export type CreatureDetail = ResultOf<typeof DETAIL>;

/** `{ minimum maximum }` of a weight ("6.75kg") or height ("0.45m"). */
export type Dimension = NonNullable<CreatureDetail['weight']>;

/** One attack of a creature. */
export type Attack = CreatureDetail['attacks']['fast'][number];

/** A link to another creature (an evolution). */
export type CreatureLink = CreatureDetail['evolutions'][number];

/** A message (spec 000, "Message"; fragment `MessageFields`). */
export type Message = ResultOf<typeof MESSAGE>;

/** Every creature (the total, the type overview and filter, the home page's random creature). */
export const AllCreaturesQuery = graphql(
  `
  query AllCreatures {
    creatures {
      ...CreatureSummary
    }
  }
`,
  [SUMMARY],
);

/** One page of the list: creatures matching a name search and a type, in an order, after a cursor. */
export const CreaturePageQuery = graphql(
  `
  query CreaturePage($first: Int, $after: String, $search: String, $type: String, $orderBy: CreatureOrder) {
    creaturesConnection(first: $first, after: $after, search: $search, type: $type, orderBy: $orderBy) {
      totalCount
      edges {
        cursor
        node {
          ...CreatureSummary
        }
      }
      pageInfo {
        hasNextPage
        endCursor
      }
    }
  }
`,
  [SUMMARY],
);

/** Variables of {@link CreaturePageQuery}. */
export type CreaturePageVariables = VariablesOf<typeof CreaturePageQuery>;

/** Fields the creature list can be sorted by (`enum CreatureOrderField`). */
export type CreatureOrderField = NonNullable<CreaturePageVariables['orderBy']>['field'];

/** One creature by name (case-insensitive). */
export const CreatureQuery = graphql(
  `
  query Creature($name: String!) {
    creature(name: $name) {
      ...CreatureDetail
    }
  }
`,
  [DETAIL],
);

/** Adds a creature. */
export const CreateCreatureMutation = graphql(
  `
  mutation CreateCreature($input: CreatureInput!) {
    createCreature(input: $input) {
      ...CreatureDetail
    }
  }
`,
  [DETAIL],
);

/** Fields of a creature the forms edit (`input CreatureInput`). */
export type CreatureFields = VariablesOf<typeof CreateCreatureMutation>['input'];

/** Changes a creature. */
export const UpdateCreatureMutation = graphql(
  `
  mutation UpdateCreature($id: ID!, $input: CreatureUpdateInput!) {
    updateCreature(id: $id, input: $input) {
      ...CreatureDetail
    }
  }
`,
  [DETAIL],
);

/** Removes a creature. */
export const DeleteCreatureMutation = graphql(
  `
  mutation DeleteCreature($id: ID!) {
    deleteCreature(id: $id) {
      ...CreatureSummary
    }
  }
`,
  [SUMMARY],
);

/** One message by id. */
export const GetMessageQuery = graphql(
  `
  query GetMessage($id: ID!) {
    getMessage(id: $id) {
      ...MessageFields
    }
  }
`,
  [MESSAGE],
);

/** Posts a message. */
export const CreateMessageMutation = graphql(
  `
  mutation CreateMessage($input: MessageInput) {
    createMessage(input: $input) {
      ...MessageFields
    }
  }
`,
  [MESSAGE],
);

/** Edits a message. */
export const UpdateMessageMutation = graphql(
  `
  mutation UpdateMessage($id: ID!, $input: MessageInput) {
    updateMessage(id: $id, input: $input) {
      ...MessageFields
    }
  }
`,
  [MESSAGE],
);

/** Live creature changes. */
export const CreatureChangedSubscription = graphql(`
  subscription CreatureChanged {
    creatureChanged {
      kind
      id
      name
    }
  }
`);

/** What happened to a creature or message (`enum ChangeKind`). */
export type ChangeKind = ResultOf<typeof CreatureChangedSubscription>['creatureChanged']['kind'];

/** Live message changes. */
export const MessageChangedSubscription = graphql(
  `
  subscription MessageChanged {
    messageChanged {
      kind
      message {
        ...MessageFields
      }
    }
  }
`,
  [MESSAGE],
);

/**
 * The human-readable text of a failed operation: each GraphQL error's message (the server names the field
 * and rule) or the network error, without urql's "[GraphQL]" prefixes.
 */
export function errorText(error: CombinedError | Error): string {
  if (error instanceof CombinedError) {
    if (error.graphQLErrors.length > 0) return error.graphQLErrors.map((e) => e.message).join('\n');
    if (error.networkError) return `Network error: ${error.networkError.message}`;
  }
  return error.message;
}
