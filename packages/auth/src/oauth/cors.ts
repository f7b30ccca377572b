/**
 * Cross-origin access for browser relying parties (Fetch Standard §3.2 "CORS protocol"): single-page apps
 * such as `oidc-client-ts` read discovery and the JWKS and call the token, UserInfo, revocation and
 * end-session endpoints from their own origin.
 *
 * An origin is allowed when a client registered it: the client's `webOrigins` metadata, or when that is
 * unset the origins of its redirect URIs (Keycloak's default). Discovery, JWKS, end-session and every
 * preflight accept any origin some enabled client registered (a preflight names no client); the token and
 * revocation endpoints then require the origin of the client the request names (HTTP Basic or the form's
 * `client_id`), UserInfo the one of the access token's `client_id`. An unknown origin gets no CORS header
 * at all, so the browser withholds the answer. Credentials (cookies) are never allowed cross-origin.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import { parseAuthorization } from '../authorization-header.ts';
import type { AuthStore, ClientRecord } from '../store/types.ts';
import type { OAuthContext } from './context.ts';
import { parseBasicAuth } from './form.ts';

/** How long the index of registered origins is reused before it is read again from the store (ms). */
export const ORIGIN_INDEX_TTL_MS = 5000;
/** `Access-Control-Max-Age` of preflight answers, seconds. */
export const PREFLIGHT_MAX_AGE_SECONDS = 600;
/** Request headers a browser client may send (`Access-Control-Allow-Headers`). */
export const CORS_ALLOWED_HEADERS = Object.freeze(['authorization', 'content-type', 'dpop']);
/** Response headers a browser client may read besides the CORS-safelisted ones. */
export const CORS_EXPOSED_HEADERS = Object.freeze(['www-authenticate', 'dpop-nonce']);
/** Most clients read into the origin index (1000 per page). */
const MAX_INDEXED_CLIENTS = 100_000;

/** Which client an endpoint's request belongs to, for the per-client origin check. */
type ClientOf = (req: FastifyRequest) => string | undefined;

/** One endpoint that answers cross-origin requests. */
interface CorsEndpoint {
  readonly path: string;
  readonly methods: readonly string[];
  /** Undefined: any registered origin (public documents, navigation endpoints). */
  readonly clientOf?: ClientOf;
}

/**
 * The origins a client allows (RFC 6454 §6.2 serializations): its `webOrigins` metadata, else the origins
 * of its redirect URIs. A disabled client allows none.
 */
export function clientWebOrigins(client: ClientRecord): string[] {
  if (!client.isEnabled) return [];
  if (client.metadata.webOrigins !== undefined) return [...client.metadata.webOrigins];
  const origins = new Set<string>();
  for (const uri of client.redirectUris) {
    try {
      const origin = new URL(uri).origin;
      if (origin !== 'null') origins.add(origin);
    } catch {
      // stored redirect URIs are validated absolute URLs; anything else allows nothing
    }
  }
  return [...origins];
}

/** The set of origins some enabled client allows, re-read at most every {@link ORIGIN_INDEX_TTL_MS}. */
class OriginIndex {
  readonly #store: AuthStore;
  readonly #now: () => number;
  #origins: Set<string> | undefined;
  #readAt = 0;
  #loading: Promise<Set<string>> | undefined;

  constructor(store: AuthStore, now: () => number) {
    this.#store = store;
    this.#now = now;
  }

  async has(origin: string): Promise<boolean> {
    if (this.#origins === undefined || this.#now() - this.#readAt >= ORIGIN_INDEX_TTL_MS) {
      this.#loading ??= this.#load().finally(() => {
        this.#loading = undefined;
      });
      await this.#loading;
    }
    return this.#origins?.has(origin) ?? false;
  }

  async #load(): Promise<Set<string>> {
    const origins = new Set<string>();
    for (let offset = 0; offset < MAX_INDEXED_CLIENTS; offset += 1000) {
      const page = await this.#store.listClients({ offset, limit: 1000 });
      for (const client of page.items) for (const origin of clientWebOrigins(client)) origins.add(origin);
      if (offset + page.items.length >= page.total || page.items.length === 0) break;
    }
    this.#origins = origins;
    this.#readAt = this.#now();
    return origins;
  }
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}

/** The client a token or revocation request names: HTTP Basic user, else the form's `client_id`. */
export function formClientOf(req: FastifyRequest): string | undefined {
  try {
    const basic = parseBasicAuth(req.headers.authorization);
    if (basic) return basic.clientId;
  } catch {
    return undefined;
  }
  const body = req.body;
  if (body instanceof URLSearchParams) {
    const ids = body.getAll('client_id');
    return ids.length === 1 ? ids[0] : undefined;
  }
  return undefined;
}

/** The `client_id` claim of the presented access token (unverified: it only chooses the CORS origin). */
export function tokenClientOf(req: FastifyRequest): string | undefined {
  const presented = parseAuthorization(single(req.headers.authorization));
  let token = presented.kind === 'token' ? presented.token : undefined;
  if (token === undefined && req.body instanceof URLSearchParams)
    token = req.body.get('access_token') ?? undefined;
  if (token === undefined) return undefined;
  try {
    const claim = decodeJwt(token).client_id;
    return typeof claim === 'string' ? claim : undefined;
  } catch {
    return undefined;
  }
}

function allowOrigin(reply: FastifyReply, origin: string): void {
  reply
    .header('access-control-allow-origin', origin)
    .header('access-control-expose-headers', CORS_EXPOSED_HEADERS.join(', '));
}

function dropOrigin(reply: FastifyReply): void {
  reply.removeHeader('access-control-allow-origin');
  reply.removeHeader('access-control-expose-headers');
}

/**
 * Registers CORS on `endpoints` of `app` (the OAuth plugin's context): an `onRequest` hook that allows a
 * registered origin (and `Vary: Origin` on every answer of these paths), a `preHandler` hook that withdraws
 * the allowance when the request's client does not list the origin, and `OPTIONS` routes answering
 * preflights with 204: `Access-Control-Allow-Origin`, `-Methods`, `-Headers` ({@link CORS_ALLOWED_HEADERS})
 * and `-Max-Age` for a registered origin, no CORS header otherwise.
 */
export function registerCors(
  app: FastifyInstance,
  ctx: OAuthContext,
  endpoints: readonly CorsEndpoint[],
): void {
  const index = new OriginIndex(ctx.store, ctx.now);
  const byPath = new Map(endpoints.map((e) => [e.path, e]));
  const endpointOf = (req: FastifyRequest) => byPath.get(req.routeOptions.url ?? '');
  const originOf = (req: FastifyRequest) => {
    const origin = single(req.headers.origin);
    return origin && origin !== 'null' ? origin : undefined;
  };

  app.addHook('onRequest', async (req, reply) => {
    const endpoint = endpointOf(req);
    if (!endpoint || req.method === 'OPTIONS') return;
    reply.header('vary', 'Origin');
    const origin = originOf(req);
    if (origin && (await index.has(origin))) allowOrigin(reply, origin);
  });
  app.addHook('preHandler', async (req, reply) => {
    const endpoint = endpointOf(req);
    if (!endpoint?.clientOf || !reply.hasHeader('access-control-allow-origin')) return;
    const origin = originOf(req);
    const clientId = endpoint.clientOf(req);
    const client = clientId === undefined ? undefined : await ctx.store.getClient(clientId);
    if (!origin || !client || !clientWebOrigins(client).includes(origin)) dropOrigin(reply);
  });
  for (const endpoint of endpoints) {
    app.options(endpoint.path, async (req, reply) => {
      reply.header('vary', 'Origin').header('cache-control', 'no-store');
      const origin = originOf(req);
      const method = single(req.headers['access-control-request-method']);
      if (origin && method && endpoint.methods.includes(method) && (await index.has(origin))) {
        reply
          .header('access-control-allow-origin', origin)
          .header('access-control-allow-methods', endpoint.methods.join(', '))
          .header('access-control-allow-headers', CORS_ALLOWED_HEADERS.join(', '))
          .header('access-control-max-age', String(PREFLIGHT_MAX_AGE_SECONDS));
      }
      return reply.code(204).send();
    });
  }
}

/** The CORS endpoints of the OAuth server: paths, methods and how each names its client. */
export function corsEndpoints(paths: {
  readonly token: string;
  readonly revocation: string;
  readonly userinfo: string;
  readonly endSession: string;
  readonly jwks: string;
}): CorsEndpoint[] {
  return [
    { path: '/.well-known/openid-configuration', methods: ['GET'] },
    { path: '/.well-known/oauth-authorization-server', methods: ['GET'] },
    { path: paths.jwks, methods: ['GET'] },
    { path: paths.endSession, methods: ['GET', 'POST'] },
    { path: paths.token, methods: ['POST'], clientOf: formClientOf },
    { path: paths.revocation, methods: ['POST'], clientOf: formClientOf },
    { path: paths.userinfo, methods: ['GET', 'POST'], clientOf: tokenClientOf },
  ];
}
