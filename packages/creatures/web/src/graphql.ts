/**
 * The front end's GraphQL client and operations. Every query and mutation goes to `/graphql` (spec 000,
 * "Clients (including a frontend) send every query and every mutation to the single endpoint"); subscriptions
 * go to the same endpoint as GraphQL-over-SSE event streams (`Accept: text/event-stream`).
 */
import { Client, CombinedError, cacheExchange, fetchExchange, gql, subscriptionExchange } from '@urql/core';
import { createClient as createSseClient } from 'graphql-sse';

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

/** `{ minimum maximum }` of a weight ("6.75kg") or height ("0.45m"). */
export interface Dimension {
  minimum: string | null;
  maximum: string | null;
}

/** One attack of a creature. */
export interface Attack {
  name: string;
  type: string;
  damage: number;
}

/** A link to another creature (an evolution). */
export interface CreatureLink {
  id: string;
  name: string;
}

/** A row of the creature list. */
export interface CreatureSummary {
  id: string;
  /** The id as a number ("025" is 25). */
  number: number;
  name: string;
  /** Path of the picture the server draws from the creature's data (`/images/creatures/25.svg`). */
  image: string | null;
  classification: string | null;
  types: string[];
  maxCP: number | null;
}

/** Everything the detail view shows of one creature. */
export interface CreatureDetail extends CreatureSummary {
  resistant: string[];
  weaknesses: string[];
  weight: Dimension | null;
  height: Dimension | null;
  fleeRate: number | null;
  maxHP: number | null;
  attacks: { fast: Attack[]; special: Attack[] };
  evolutions: CreatureLink[];
  previousEvolutions: CreatureLink[];
  evolutionRequirements: { amount: number; name: string } | null;
}

/** A message (spec 000, "Message"). */
export interface Message {
  id: string;
  content: string | null;
  author: string | null;
}

/** Fields of a creature the forms edit (`CreatureInput` / `CreatureUpdateInput`). */
export interface CreatureFields {
  name: string;
  classification: string | null;
  types: string[];
  resistant: string[];
  weaknesses: string[];
  weight: Dimension | null;
  height: Dimension | null;
  fleeRate: number | null;
  maxCP: number | null;
  maxHP: number | null;
  attacks: { fast: Attack[]; special: Attack[] };
  /** Ids of every later evolution stage, nearest first. */
  evolutionIds: string[];
  /** Ids of every earlier evolution stage, earliest first. */
  previousEvolutionIds: string[];
  evolutionRequirements: { amount: number; name: string } | null;
}

const SUMMARY = gql`
  fragment CreatureSummary on Creature {
    id
    number
    name
    image
    classification
    types
    maxCP
  }
`;

const DETAIL = gql`
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
  ${SUMMARY}
`;

const MESSAGE = gql`
  fragment MessageFields on Message {
    id
    content
    author
  }
`;

/** Every creature (the total, the type overview and filter, the home page's random creature). */
export const AllCreaturesQuery = gql<{ creatures: CreatureSummary[] }>`
  query AllCreatures {
    creatures {
      ...CreatureSummary
    }
  }
  ${SUMMARY}
`;

/** Fields the creature list can be sorted by (`CreatureOrderField`). */
export type CreatureOrderField = 'NUMBER' | 'NAME' | 'MAX_CP' | 'MAX_HP';

/** Variables of {@link CreaturePageQuery}. */
export interface CreaturePageVariables {
  first: number;
  after: string | null;
  search: string | null;
  type: string | null;
  orderBy: { field: CreatureOrderField; direction: 'ASC' | 'DESC' };
}

/** One page of the list: creatures matching a name search and a type, in an order, after a cursor. */
export const CreaturePageQuery = gql<
  {
    creaturesConnection: {
      totalCount: number;
      edges: { cursor: string; node: CreatureSummary }[];
      pageInfo: { hasNextPage: boolean; endCursor: string | null };
    };
  },
  CreaturePageVariables
>`
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
  ${SUMMARY}
`;

/** One creature by name (case-insensitive). */
export const CreatureQuery = gql<{ creature: CreatureDetail | null }, { name: string }>`
  query Creature($name: String!) {
    creature(name: $name) {
      ...CreatureDetail
    }
  }
  ${DETAIL}
`;

/** Adds a creature. */
export const CreateCreatureMutation = gql<{ createCreature: CreatureDetail }, { input: CreatureFields }>`
  mutation CreateCreature($input: CreatureInput!) {
    createCreature(input: $input) {
      ...CreatureDetail
    }
  }
  ${DETAIL}
`;

/** Changes a creature. */
export const UpdateCreatureMutation = gql<
  { updateCreature: CreatureDetail },
  { id: string; input: Partial<CreatureFields> }
>`
  mutation UpdateCreature($id: ID!, $input: CreatureUpdateInput!) {
    updateCreature(id: $id, input: $input) {
      ...CreatureDetail
    }
  }
  ${DETAIL}
`;

/** Removes a creature. */
export const DeleteCreatureMutation = gql<{ deleteCreature: CreatureSummary }, { id: string }>`
  mutation DeleteCreature($id: ID!) {
    deleteCreature(id: $id) {
      ...CreatureSummary
    }
  }
  ${SUMMARY}
`;

/** One message by id. */
export const GetMessageQuery = gql<{ getMessage: Message | null }, { id: string }>`
  query GetMessage($id: ID!) {
    getMessage(id: $id) {
      ...MessageFields
    }
  }
  ${MESSAGE}
`;

/** Posts a message. */
export const CreateMessageMutation = gql<
  { createMessage: Message | null },
  { input: { content: string; author: string | null } }
>`
  mutation CreateMessage($input: MessageInput) {
    createMessage(input: $input) {
      ...MessageFields
    }
  }
  ${MESSAGE}
`;

/** Edits a message. */
export const UpdateMessageMutation = gql<
  { updateMessage: Message | null },
  { id: string; input: { content: string; author: string | null } }
>`
  mutation UpdateMessage($id: ID!, $input: MessageInput) {
    updateMessage(id: $id, input: $input) {
      ...MessageFields
    }
  }
  ${MESSAGE}
`;

/** What happened to a creature or message (`enum ChangeKind`). */
export type ChangeKind = 'CREATED' | 'UPDATED' | 'DELETED';

/** Live creature changes. */
export const CreatureChangedSubscription = gql<{
  creatureChanged: { kind: ChangeKind; id: string; name: string };
}>`
  subscription CreatureChanged {
    creatureChanged {
      kind
      id
      name
    }
  }
`;

/** Live message changes. */
export const MessageChangedSubscription = gql<{ messageChanged: { kind: ChangeKind; message: Message } }>`
  subscription MessageChanged {
    messageChanged {
      kind
      message {
        ...MessageFields
      }
    }
  }
  ${MESSAGE}
`;

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
