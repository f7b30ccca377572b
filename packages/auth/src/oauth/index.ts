/**
 * The OAuth 2.0 / OpenID Connect layer of spec 001: its public building blocks and the shared context
 * ({@link createOAuthContext}) its endpoints run on. The Fastify plugin that registers every endpoint and the
 * login pages is `oauthServer` in `../oauth-server.ts`.
 */
import type { UpstreamProvider } from '../broker/config.ts';
import type { CredentialValidator } from '../credentials.ts';
import type { PasswordHasher } from '../passwords.ts';
import type { RateLimits } from '../ratelimit.ts';
import type { AuthStore } from '../store/types.ts';
import { ClientAssertionVerifier } from './client-auth-jwt.ts';
import { ClientSecrets } from './client-secrets.ts';
import { ClientAuthenticator } from './clients.ts';
import type { OAuthConfig } from './config.ts';
import type { OAuthContext } from './context.ts';
import { createDpopVerifier, storeReplayCache } from './dpop-token.ts';
import type { KeyManager } from './keys.ts';
import { assertionAudiences } from './metadata.ts';
import { TokenIssuer } from './tokens.ts';

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
