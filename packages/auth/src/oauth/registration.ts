/**
 * Dynamic Client Registration (RFC 7591) and its management protocol (RFC 7592): `POST /connect/register`
 * behind an initial access token (or open, by policy), and `GET|PUT|DELETE /connect/register/{client_id}`
 * with the client's registration access token. Registered clients get at most the policy's grant types and
 * scopes. Errors: `invalid_redirect_uri`, `invalid_client_metadata` (400, RFC 7591 §3.2.2), `invalid_token`
 * (401, RFC 6750 §3.1).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseAuthorization } from '../authorization-header.ts';
import { clientAddress } from '../client-address.ts';
import { ValidationError } from '../errors.ts';
import {
  AuditCategory,
  AuditOutcome,
  type ClientMetadata,
  type ClientRecord,
  type GrantType,
  type TokenEndpointAuthMethod,
} from '../store/types.ts';
import { isSealedSecret } from './client-secrets.ts';
import type { OAuthContext } from './context.ts';

/** Path of the registration endpoint (RFC 7591 §3). */
export const REGISTRATION_PATH = '/connect/register';

/**
 * Methods a registering client may choose; `client_secret_jwt` only when the server has a client-secret
 * key (its secret is then stored sealed, `client-secrets.ts`).
 */
function authMethods(ctx: OAuthContext): readonly TokenEndpointAuthMethod[] {
  return [
    'client_secret_basic',
    'client_secret_post',
    ...(ctx.clientSecrets.sealingEnabled ? (['client_secret_jwt'] as const) : []),
    'private_key_jwt',
    'none',
  ];
}

/** A refusal with an RFC 7591 §3.2.2 / RFC 6750 §3.1 error code. */
class RegistrationError extends Error {
  readonly error: 'invalid_redirect_uri' | 'invalid_client_metadata' | 'invalid_token';
  readonly status: 400 | 401;
  constructor(error: RegistrationError['error'], description: string) {
    super(description);
    this.error = error;
    this.status = error === 'invalid_token' ? 401 : 400;
  }
}

const digest = (value: string) => createHash('sha256').update(value).digest();
const sameDigest = (a: Buffer, b: Buffer) => a.length === b.length && timingSafeEqual(a, b);

/** The registration access token of an `Authorization: Bearer` header (RFC 7592 §3), if one is presented. */
function bearer(req: FastifyRequest): string | undefined {
  const parsed = parseAuthorization(req.headers.authorization);
  return parsed.kind === 'token' && parsed.scheme === 'Bearer' ? parsed.token : undefined;
}

/** What the client asked for, validated against the policy (RFC 7591 §2). */
interface Registration {
  readonly method: TokenEndpointAuthMethod;
  readonly redirectUris: string[];
  readonly grantTypes: GrantType[];
  readonly scopes: string[];
  readonly name: string;
  readonly metadata: ClientMetadata;
}

function stringList(value: unknown, field: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length > 32 || value.some((v) => typeof v !== 'string'))
    throw new RegistrationError('invalid_client_metadata', `${field}: must be an array of strings`);
  return value as string[];
}

/**
 * Validates RFC 7591 §2 metadata against the registration policy. Unknown fields are ignored (§2).
 * @throws RegistrationError `invalid_redirect_uri`, `invalid_client_metadata`.
 */
function parseRegistration(body: unknown, ctx: OAuthContext): Registration {
  const policy = ctx.config.registration!;
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new RegistrationError('invalid_client_metadata', 'body: must be a JSON object');
  const input = body as Record<string, unknown>;
  const method = (input.token_endpoint_auth_method ?? 'client_secret_basic') as TokenEndpointAuthMethod;
  const methods = authMethods(ctx);
  if (!methods.includes(method))
    throw new RegistrationError(
      'invalid_client_metadata',
      `token_endpoint_auth_method: one of ${methods.join(', ')}`,
    );
  const grantTypes = (stringList(input.grant_types, 'grant_types') ?? ['authorization_code']) as GrantType[];
  for (const grant of grantTypes) {
    if (!policy.grantTypes.includes(grant))
      throw new RegistrationError(
        'invalid_client_metadata',
        `grant_types: '${String(grant).slice(0, 80)}' is not allowed`,
      );
  }
  if (method === 'none' && grantTypes.includes('client_credentials'))
    throw new RegistrationError(
      'invalid_client_metadata',
      'grant_types: client_credentials needs client authentication',
    );
  const responseTypes =
    stringList(input.response_types, 'response_types') ??
    (grantTypes.includes('authorization_code') ? ['code'] : []);
  if (
    responseTypes.some((r) => r !== 'code') ||
    responseTypes.includes('code') !== grantTypes.includes('authorization_code')
  )
    throw new RegistrationError(
      'invalid_client_metadata',
      "response_types: 'code' exactly when grant_types has authorization_code",
    );
  const redirectUris = stringList(input.redirect_uris, 'redirect_uris') ?? [];
  if (grantTypes.includes('authorization_code') && redirectUris.length === 0)
    throw new RegistrationError(
      'invalid_redirect_uri',
      'redirect_uris: required for the authorization code grant',
    );
  const scope = input.scope;
  if (scope !== undefined && typeof scope !== 'string')
    throw new RegistrationError('invalid_client_metadata', 'scope: must be a string');
  const scopes = scope === undefined ? [...policy.scopes] : [...new Set(scope.split(' ').filter(Boolean))];
  for (const s of scopes) {
    if (!policy.scopes.includes(s))
      throw new RegistrationError('invalid_client_metadata', `scope: '${s.slice(0, 80)}' is not allowed`);
  }
  const name = input.client_name === undefined ? '' : input.client_name;
  if (typeof name !== 'string' || name.length > 256)
    throw new RegistrationError('invalid_client_metadata', 'client_name: a string of at most 256 characters');
  const metadata: Record<string, unknown> = {};
  if (input.token_endpoint_auth_method !== undefined && method !== 'none')
    metadata.tokenEndpointAuthMethod = method;
  if (input.jwks !== undefined) metadata.jwks = input.jwks;
  if (input.jwks_uri !== undefined) metadata.jwksUri = input.jwks_uri;
  if (input.dpop_bound_access_tokens !== undefined)
    metadata.dpopBoundAccessTokens = input.dpop_bound_access_tokens;
  if (input.require_pushed_authorization_requests !== undefined)
    metadata.requirePushedAuthorizationRequests = input.require_pushed_authorization_requests;
  return { method, redirectUris, grantTypes, scopes, name, metadata: metadata as ClientMetadata };
}

/** The registration response (RFC 7591 §3.2.1, RFC 7592 §3): the client's metadata in RFC 7591 names. */
function registrationView(ctx: OAuthContext, client: ClientRecord): Record<string, unknown> {
  const m = client.metadata;
  return {
    client_id: client.clientId,
    client_id_issued_at: Math.floor(client.createdAt / 1000),
    client_name: client.displayName || undefined,
    redirect_uris: client.redirectUris,
    grant_types: client.allowedGrantTypes,
    response_types: client.allowedGrantTypes.includes('authorization_code') ? ['code'] : [],
    scope: client.allowedScopes.join(' '),
    token_endpoint_auth_method:
      m.tokenEndpointAuthMethod ?? (client.clientType === 'public' ? 'none' : 'client_secret_basic'),
    jwks: m.jwks,
    jwks_uri: m.jwksUri,
    dpop_bound_access_tokens: m.dpopBoundAccessTokens,
    require_pushed_authorization_requests: m.requirePushedAuthorizationRequests,
    registration_client_uri: `${ctx.config.issuer}${REGISTRATION_PATH}/${client.clientId}`,
  };
}

function send(reply: FastifyReply, status: number, body: unknown): FastifyReply {
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .header('pragma', 'no-cache')
    .type('application/json; charset=utf-8')
    .send(body);
}

function sendError(reply: FastifyReply, error: RegistrationError): FastifyReply {
  if (error.status === 401) reply.header('www-authenticate', `Bearer error="invalid_token"`);
  return send(reply, error.status, { error: error.error, error_description: error.message });
}

/** Maps a store validation error to RFC 7591 §3.2.2 (redirect URIs have their own code). */
function storeError(error: unknown): RegistrationError {
  if (error instanceof ValidationError) {
    const code = error.field.startsWith('redirectUris') ? 'invalid_redirect_uri' : 'invalid_client_metadata';
    return new RegistrationError(code, error.message.replace(/^metadata\./, ''));
  }
  throw error;
}

/** Registers the registration endpoints (only called when `config.registration` is set). */
export function registerRegistrationEndpoints(app: FastifyInstance, ctx: OAuthContext): void {
  const policy = ctx.config.registration!;
  const initialDigests = policy.initialAccessTokens.map(digest);
  const audit = (
    req: FastifyRequest,
    outcome: string,
    clientId: string | null,
    action: string,
    failure?: string,
  ) =>
    ctx.store.appendAudit({
      category: AuditCategory.Admin,
      outcome,
      clientId,
      failureCode: failure ?? null,
      remoteAddress: clientAddress(req),
      details: { action },
    });

  /** RFC 7592 §2: the registration access token of `clientId`. @throws RegistrationError `invalid_token`. */
  const authorizeManagement = async (req: FastifyRequest, clientId: string): Promise<ClientRecord> => {
    const token = bearer(req);
    const stored = await ctx.store.findRegistrationAccessToken(clientId);
    const client = await ctx.store.getClient(clientId);
    // §2: an unknown client and a wrong token look the same (401).
    if (!token || !stored || !client || !sameDigest(digest(token), Buffer.from(stored, 'base64url')))
      throw new RegistrationError('invalid_token', 'registration access token is invalid');
    return client;
  };

  const issue = async (client: ClientRecord, secret: string | undefined) => {
    const token = randomBytes(32).toString('base64url');
    await ctx.store.setRegistrationAccessToken(
      client.clientId,
      digest(token).toString('base64url'),
      ctx.now(),
    );
    return {
      ...registrationView(ctx, client),
      ...(secret ? { client_secret: secret, client_secret_expires_at: 0 } : {}),
      registration_access_token: token,
    };
  };

  app.post(REGISTRATION_PATH, async (req, reply) => {
    try {
      const token = bearer(req);
      if (!policy.open && (!token || !initialDigests.some((d) => sameDigest(d, digest(token)))))
        throw new RegistrationError('invalid_token', 'an initial access token is required');
      const r = parseRegistration(req.body, ctx);
      const confidential = r.method !== 'none';
      const secret = randomBytes(32).toString('base64url');
      const clientId = randomBytes(16).toString('base64url');
      let client: ClientRecord;
      try {
        client = await ctx.store.createClient({
          clientId,
          clientType: confidential ? 'confidential' : 'public',
          // The store needs a secret for every confidential client; a private_key_jwt client never sees it.
          // A client_secret_jwt client's secret is sealed (the server verifies HMACs keyed by it).
          secretHash: confidential ? await ctx.clientSecrets.store(clientId, secret, r.method) : null,
          displayName: r.name,
          redirectUris: r.redirectUris,
          allowedGrantTypes: r.grantTypes,
          allowedScopes: r.scopes,
        });
        client = await ctx.store.setClientMetadata(clientId, r.metadata);
      } catch (error) {
        await ctx.store.getClient(clientId).then((c) => (c ? ctx.store.deleteClient(clientId) : undefined));
        throw storeError(error);
      }
      await audit(req, AuditOutcome.Success, clientId, 'client.register');
      const usesSecret = r.method !== 'private_key_jwt' && r.method !== 'none';
      return send(reply, 201, await issue(client, usesSecret ? secret : undefined));
    } catch (error) {
      if (!(error instanceof RegistrationError)) throw error;
      await audit(req, AuditOutcome.Denied, null, 'client.register', error.error);
      return sendError(reply, error);
    }
  });

  app.get<{ Params: { clientId: string } }>(`${REGISTRATION_PATH}/:clientId`, async (req, reply) => {
    try {
      return send(reply, 200, registrationView(ctx, await authorizeManagement(req, req.params.clientId)));
    } catch (error) {
      if (error instanceof RegistrationError) return sendError(reply, error);
      throw error;
    }
  });

  app.put<{ Params: { clientId: string } }>(`${REGISTRATION_PATH}/:clientId`, async (req, reply) => {
    try {
      const current = await authorizeManagement(req, req.params.clientId);
      const body = req.body as Record<string, unknown> | null;
      if (body?.client_id !== current.clientId)
        throw new RegistrationError(
          'invalid_client_metadata',
          'client_id: must be the client being updated (RFC 7592 §2.2)',
        );
      const r = parseRegistration(body, ctx);
      if ((r.method === 'none') !== (current.clientType === 'public'))
        throw new RegistrationError(
          'invalid_client_metadata',
          'token_endpoint_auth_method: cannot change between public and confidential',
        );
      if (r.method === 'client_secret_jwt' && !isSealedSecret(current.secretHash))
        throw new RegistrationError(
          'invalid_client_metadata',
          'token_endpoint_auth_method: client_secret_jwt needs a secret issued for it; register a new client',
        );
      let client: ClientRecord;
      try {
        client = await ctx.store.updateClient(current.clientId, {
          displayName: r.name,
          redirectUris: r.redirectUris,
          allowedGrantTypes: r.grantTypes,
          allowedScopes: r.scopes,
        });
        client = await ctx.store.setClientMetadata(current.clientId, r.metadata);
      } catch (error) {
        throw storeError(error);
      }
      await audit(req, AuditOutcome.Success, client.clientId, 'client.register.update');
      return send(reply, 200, registrationView(ctx, client));
    } catch (error) {
      if (error instanceof RegistrationError) return sendError(reply, error);
      throw error;
    }
  });

  app.delete<{ Params: { clientId: string } }>(`${REGISTRATION_PATH}/:clientId`, async (req, reply) => {
    try {
      const client = await authorizeManagement(req, req.params.clientId);
      await ctx.store.deleteClient(client.clientId);
      await audit(req, AuditOutcome.Success, client.clientId, 'client.register.delete');
      return reply.code(204).header('cache-control', 'no-store').send();
    } catch (error) {
      if (error instanceof RegistrationError) return sendError(reply, error);
      throw error;
    }
  });
}
