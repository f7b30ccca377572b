/**
 * The OAuth 2.0 authorization server of spec 001 as one Fastify plugin ({@link oauthServer}): token,
 * authorization, revocation and introspection endpoints, discovery metadata, JWKS and the login page.
 */
import cookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import type { UpstreamProvider } from '../broker/config.ts';
import type { CredentialValidator } from '../credentials.ts';
import { registerLoginPage } from '../login/index.ts';
import type { PasswordHasher } from '../passwords.ts';
import type { RateLimits } from '../ratelimit.ts';
import type { AuthStore } from '../store/types.ts';
import { registerAuthorizeEndpoint } from './authorize.ts';
import { ClientAssertionVerifier } from './client-auth-jwt.ts';
import { ClientSecrets } from './client-secrets.ts';
import { ClientAuthenticator } from './clients.ts';
import type { OAuthConfig } from './config.ts';
import type { OAuthContext } from './context.ts';
import { corsEndpoints, registerCors } from './cors.ts';
import { DEVICE_CODE_GRANT, registerDeviceAuthorizationEndpoint } from './device.ts';
import { registerDeviceVerificationPage } from './device-page.ts';
import { createDpopVerifier, storeReplayCache } from './dpop-token.ts';
import type { KeyManager } from './keys.ts';
import { assertionAudiences, ENDPOINT_PATHS, registerMetadataEndpoints } from './metadata.ts';
import { registerParEndpoint } from './par.ts';
import { registerRegistrationEndpoints } from './registration.ts';
import { registerRevocationAndIntrospection } from './revocation.ts';
import { registerTokenEndpoint } from './token-endpoint.ts';
import { TokenIssuer } from './tokens.ts';
import { registerUserInfoEndpoint } from './userinfo.ts';

export {
  CLIENT_ASSERTION_SIGNING_ALGS,
  ClientAssertionVerifier,
  type ClientAssertionVerifierOptions,
  JWT_BEARER_ASSERTION_TYPE,
} from './client-auth-jwt.ts';
export { ClientSecrets, isSealedSecret } from './client-secrets.ts';
export { type AuthenticatedClient, ClientAuthenticator, type ClientAuthMethod } from './clients.ts';
export { type OAuthConfig, type OAuthOptions, resolveOAuthConfig } from './config.ts';
export type { OAuthContext } from './context.ts';
export { CORS_ALLOWED_HEADERS, CORS_EXPOSED_HEADERS, clientWebOrigins } from './cors.ts';
export {
  accessTokenHash,
  DPOP_SIGNING_ALGS,
  type DpopErrorCode,
  DpopNonces,
  type DpopProof,
  DpopProofError,
  DpopProofVerifier,
  type DpopProofVerifierOptions,
  dpopChallenge,
  type ReplayCache,
} from './dpop.ts';
export { createDpopVerifier, storeReplayCache } from './dpop-token.ts';
export { OAuthError, type OAuthErrorCode } from './errors.ts';
export {
  type ActiveSigningKey,
  KeyManager,
  type KeyManagerOptions,
  type SigningAlg,
  SUPPORTED_SIGNING_ALGS,
} from './keys.ts';
export { authorizationServerMetadata, ENDPOINT_PATHS } from './metadata.ts';
export type { TokenResponse } from './token-endpoint.ts';
export {
  type AccessTokenInput,
  hashToken,
  SECURITY_STAMP_CLAIM,
  TokenIssuer,
  type TokenSubject,
} from './tokens.ts';

/** Options of {@link oauthServer}. */
export interface OAuthServerOptions {
  readonly config: OAuthConfig;
  readonly store: AuthStore;
  /** Initialised key manager ({@link KeyManager.init} awaited). */
  readonly keys: KeyManager;
  readonly credentials: CredentialValidator;
  /** Hasher used to verify client secrets. */
  readonly hasher: PasswordHasher;
  /** Clock, ms since epoch (default `Date.now`). */
  readonly now?: () => number;
  /** Brute-force limits (password, TOTP, reset); undefined turns them off. */
  readonly limits?: RateLimits;
  /** Upstream OpenID providers (validated by `resolveUpstreamProviders`) offered on the login page. */
  readonly upstreamProviders?: readonly UpstreamProvider[];
}

/** Builds the shared endpoint context. */
export function createOAuthContext(options: OAuthServerOptions): OAuthContext {
  const now = options.now ?? Date.now;
  const clientSecrets = new ClientSecrets(options.hasher, options.config.clientSecretKey);
  return {
    config: options.config,
    store: options.store,
    keys: options.keys,
    tokens: new TokenIssuer(options.config, options.keys, now),
    clients: new ClientAuthenticator(
      options.store,
      options.hasher,
      new ClientAssertionVerifier({
        replay: storeReplayCache(options.store, now),
        audiences: () => assertionAudiences(options.config.issuer),
        now,
      }),
      clientSecrets,
    ),
    clientSecrets,
    credentials: options.credentials,
    hasher: options.hasher,
    now,
    dpop: createDpopVerifier(options.config, options.store, now),
    limits: options.limits,
    upstreamProviders: options.upstreamProviders,
  };
}

/**
 * Fastify plugin: registers `@fastify/cookie` and every OAuth route and the login page on `app`.
 * Routes: `POST /connect/token`, `GET /connect/authorize`, `POST /connect/revocation`,
 * `POST /connect/introspect`, `GET /.well-known/oauth-authorization-server`,
 * `GET /.well-known/openid-configuration`, `GET /.well-known/jwks.json`, `GET|POST /login`, `POST /logout`,
 * and CORS with `OPTIONS` preflights on the endpoints browser apps call (see `cors.ts`).
 */
export async function oauthServer(app: FastifyInstance, options: OAuthServerOptions): Promise<void> {
  const ctx = createOAuthContext(options);
  if (!app.hasDecorator('parseCookie')) await app.register(cookie);
  registerCors(app, ctx, corsEndpoints(ENDPOINT_PATHS));
  registerMetadataEndpoints(app, ctx);
  registerAuthorizeEndpoint(app, ctx);
  registerTokenEndpoint(app, ctx);
  if (ctx.config.par) registerParEndpoint(app, ctx);
  if (ctx.config.registration) registerRegistrationEndpoints(app, ctx);
  if (ctx.config.grantTypes.includes(DEVICE_CODE_GRANT)) {
    registerDeviceAuthorizationEndpoint(app, ctx);
    registerDeviceVerificationPage(app, ctx);
  }
  registerRevocationAndIntrospection(app, ctx);
  registerUserInfoEndpoint(app, ctx);
  registerLoginPage(app, ctx);
}
