/**
 * `@seed/auth` — the authorization and token service of spec 001 as a library.
 *
 * - The server: {@link buildAuthServer} builds the whole Fastify app (OAuth 2.0 token,
 *   authorization, revocation and introspection endpoints, discovery, JWKS, login page, administration
 *   API) over the SQLite store; {@link configFromEnv} reads the `AUTH_*` environment the `auth-server`
 *   command uses; {@link oauthServer} is the OAuth part alone as a Fastify plugin for an app of your own.
 *   Embedding: `const server = await buildAuthServer(configFromEnv().options); await server.listen(0)`.
 * - The core: storage, password hashing, credential validation with lockout and audit, permission
 *   evaluation with compiled matchers, ABAC policies, and the permission middleware (Fastify plugin and
 *   plain Node adapter).
 *
 * See `packages/auth/README.md`.
 */

export {
  ADMIN_ERROR_STATUS,
  ADMIN_MAX_PARAM_LENGTH,
  type AdminApiOptions,
  type AdminCaller,
  type AdminErrorCode,
  AdminHttpError,
  type AdminPageOptions,
  AdminPermission,
  adminApi,
  adminServerOptions,
  DEFAULT_ADMIN_BASE_PATH,
  normalizeBasePath,
  SeparationOfDutiesError,
} from './admin/index.ts';
export { AuditLog, type AuditSink, redactDetails } from './audit.ts';
export {
  type AuthorizationInput,
  type AuthorizationOutcome,
  AuthorizationService,
  type AuthorizationServiceOptions,
  type Denial,
  type DenialBody,
  denialFor,
  type EndpointRequirement,
  upgradeQueryToken,
} from './authorization.ts';
export {
  type BootstrapOptions,
  type BootstrapResult,
  bootstrapStore,
  DEMO_SERVICE_CLIENT_ID,
  DEMO_SPA_CLIENT_ID,
  demoSpaRedirectUris,
} from './bootstrap.ts';
export {
  type ClaimMapping,
  DEFAULT_CLAIM_MAPPING,
  resolveUpstreamProviders,
  type UpstreamProvider,
  type UpstreamProviderConfig,
} from './broker/config.ts';
export { upstreamRedirectUri } from './broker/routes.ts';
export {
  type CredentialContext,
  CredentialValidationError,
  type CredentialValidationResult,
  CredentialValidator,
  type CredentialValidatorOptions,
  DEFAULT_LOCKOUT_DURATION_MS,
  DEFAULT_MAX_ACCESS_FAILED_COUNT,
} from './credentials.ts';
export { configFromEnv, type EnvConfig } from './env-config.ts';
export {
  AUTH_ERROR_STATUS,
  AuthError,
  type AuthErrorCode,
  ConflictError,
  ConstraintError,
  InvalidTokenError,
  NotFoundError,
  ValidationError,
} from './errors.ts';
export { type AuthPluginOptions, authPlugin, type DeniedContext } from './middleware/fastify.ts';
export {
  type AuthorizedRequest,
  createAuthMiddleware,
  type NextFunction,
  type NodeAuthMiddlewareOptions,
} from './middleware/node.ts';
export {
  type AccessTokenInput,
  type ActiveSigningKey,
  type AuthenticatedClient,
  authorizationServerMetadata,
  ClientAuthenticator,
  type ClientAuthMethod,
  createOAuthContext,
  ENDPOINT_PATHS,
  hashToken,
  KeyManager,
  type KeyManagerOptions,
  type OAuthConfig,
  type OAuthContext,
  OAuthError,
  type OAuthErrorCode,
  type OAuthOptions,
  type OAuthServerOptions,
  resolveOAuthConfig,
  type SigningAlg,
  SUPPORTED_SIGNING_ALGS,
  TokenIssuer,
  type TokenResponse,
  type TokenSubject,
} from './oauth/index.ts';
export { oauthServer } from './oauth-server.ts';
export {
  MAX_PASSWORD_LENGTH,
  OWASP_SCRYPT_PARAMS,
  PasswordHasher,
  type PasswordHasherOptions,
  type ScryptParams,
} from './passwords.ts';
export {
  MATCHER_MEMO_SIZE,
  MAX_PERMISSION_CODE_LENGTH,
  MAX_PERMISSION_SEGMENTS,
  MatcherCache,
  type NormalizeOptions,
  normalizePermissionCode,
  normalizePermissionCodes,
  type PermissionEffect,
  PermissionMatcher,
  type PermissionRules,
  tryNormalizePermissionCode,
} from './permissions.ts';
export {
  type AuthSubject,
  compilePolicy,
  type PolicyCondition,
  type PolicyContext,
  type PolicyDefinition,
  type PolicyOutcome,
  type PolicyPredicate,
  PolicyRegistry,
  type PolicyRequest,
} from './policies.ts';
export {
  DEFAULT_RATE_LIMITS,
  type KindLimits,
  LIMIT_KINDS,
  type LimitDecision,
  type LimitKeys,
  type LimitKind,
  type LimitRule,
  type LimitScope,
  type PgQueryClient,
  RATE_LIMIT_TABLE,
  type RateLimitSettings,
  RateLimits,
  rateLimitsFromEnv,
  resolveRateLimits,
} from './ratelimit.ts';
export {
  type AuthorizationDecision,
  AuthorizationReason,
  type AuthorizationReasonName,
  decision,
  isGrantingReason,
  reasonName,
} from './reasons.ts';
export {
  type AuthServer,
  type AuthServerOptions,
  buildAuthServer,
  DEFAULT_AUTH_PORT,
  DEFAULT_DATABASE_PATH,
} from './server.ts';
export type { LinkStore, UserLinkRecord } from './store/links.ts';
export {
  ADMINISTRATOR_ROLE_ID,
  ADMINISTRATOR_ROLE_NAME,
  MIGRATIONS,
  type Migration,
} from './store/migrations.ts';
export { checkPostgresUrl, PostgresAuthStore, type PostgresAuthStoreOptions } from './store/postgres.ts';
export { SqliteAuthStore, type SqliteAuthStoreOptions } from './store/sqlite.ts';
export * from './store/types.ts';
export {
  JwtTokenVerifier,
  type JwtTokenVerifierOptions,
  type JwtVerificationKey,
  SECURITY_STAMP_CLAIM,
  type TokenVerifier,
  type VerifiedToken,
} from './token-verifier.ts';
