/**
 * The auth server of spec 001: a Fastify app with the OAuth endpoints, the login page and (when present)
 * the administration API, over the SQLite store (embedded, one process) or the PostgreSQL store (several
 * instances behind one database, `AUTH_DATABASE_URL`). The composition root: {@link buildAuthServer} wires
 * the parts; `configFromEnv` (`env-config.ts`) reads the environment and `bootstrapStore` (`bootstrap.ts`)
 * seeds an empty store.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { adminApi, adminServerOptions } from './admin/index.ts';
import { AuthorizationService } from './authorization.ts';
import { type BootstrapOptions, type BootstrapResult, bootstrapStore } from './bootstrap.ts';
import { resolveUpstreamProviders, type UpstreamProviderConfig } from './broker/config.ts';
import { TrustedProxies, trustProxiesFor } from './client-address.ts';
import { CredentialValidator } from './credentials.ts';
import { registerHealthRoutes } from './health.ts';
import { AuthMetrics, metricsPlugin } from './metrics.ts';
import { type OAuthOptions, resolveOAuthConfig } from './oauth/config.ts';
import type { DpopProofVerifier } from './oauth/dpop.ts';
import { createDpopVerifier } from './oauth/dpop-token.ts';
import { KeyManager, type SigningAlg } from './oauth/keys.ts';
import { oauthServer } from './oauth-server.ts';
import { PasswordHasher, type ScryptParams } from './passwords.ts';
import { type KindLimits, type LimitKind, RateLimits, resolveRateLimits } from './ratelimit.ts';
import { PostgresAuthStore } from './store/postgres.ts';
import { SqliteAuthStore } from './store/sqlite.ts';
import type { AuthStore } from './store/types.ts';
import {
  JwtTokenVerifier,
  type TokenPresentation,
  type TokenVerifier,
  type VerifiedToken,
} from './token-verifier.ts';

/** Default listening port (`AUTH_PORT`). */
export const DEFAULT_AUTH_PORT = 4100;
/**
 * Default database file: `.data/auth.sqlite` under the working directory at start (for `npm run start:auth`
 * in this repository, `packages/auth/.data/auth.sqlite`; the `.data/` folder is git-ignored). Never inside
 * the installed package.
 */
export const DEFAULT_DATABASE_PATH = resolve('.data', 'auth.sqlite');
/** Settings of {@link buildAuthServer}. */
export interface AuthServerOptions {
  /** SQLite file path or `':memory:'`. Ignored when `store` or `databaseUrl` is given. Default {@link DEFAULT_DATABASE_PATH}. */
  databasePath?: string;
  /**
   * PostgreSQL connection URL (`postgres://user:password@host:port/database`): when set, the server uses
   * {@link PostgresAuthStore} (several instances may share the database) instead of SQLite. Ignored when
   * `store` is given.
   */
  databaseUrl?: string;
  /** An already opened store (tests); the server closes it on `app.close()` unless `closeStore` is false. */
  store?: AuthStore;
  closeStore?: boolean;
  /** OAuth settings (issuer, lifetimes, grant types…). */
  oauth?: OAuthOptions;
  /** JWS algorithm of new signing keys. Default `RS256`. */
  signingAlg?: SigningAlg;
  /** scrypt parameters for passwords and client secrets (default OWASP; tests lower them). */
  hashParams?: ScryptParams;
  /** Lockout settings of credential validation. */
  maxAccessFailedCount?: number;
  lockoutDurationMs?: number;
  /** Bootstrap of an empty store. */
  bootstrap?: BootstrapOptions;
  /** Base path of the administration API (default `/auth-admin`). */
  adminBasePath?: string;
  /** Fastify request logging (default false). */
  logger?: boolean;
  /** Serve Prometheus metrics at `GET /metrics` (default true; `AUTH_METRICS=0` turns it off). */
  metrics?: boolean;
  /**
   * Brute-force limits per kind (`password`, `totp`, `reset`) and counter (`ip`, `account`), merged over
   * `DEFAULT_RATE_LIMITS`; `false` turns them all off. In memory on SQLite, in the database on
   * PostgreSQL (shared by the instances); see `RateLimits`.
   */
  rateLimits?: Partial<Record<LimitKind, Partial<KindLimits>>> | false;
  /**
   * Upstream OpenID providers offered as "Sign in with …" on the login page (identity brokering;
   * `AUTH_UPSTREAM_PROVIDERS`). Register `<issuer>/login/upstream/<id>/callback` at each provider.
   */
  upstreamProviders?: readonly UpstreamProviderConfig[];
  /**
   * Reverse proxies (addresses and CIDR ranges, `AUTH_TRUSTED_PROXIES`) whose `Forwarded` (RFC 7239) or
   * `X-Forwarded-For` header names the client for the per-IP limits and the audit log; see
   * `client-address.ts`. Default none: the TCP peer is the client and those headers are ignored.
   * @throws RangeError (from {@link buildAuthServer}) naming `trustedProxies` and a malformed entry.
   */
  trustedProxies?: readonly string[];
  /** Clock, ms since epoch. */
  now?: () => number;
}

/** A built server and its parts. */
export interface AuthServer {
  readonly app: FastifyInstance;
  readonly store: AuthStore;
  readonly keys: KeyManager;
  readonly hasher: PasswordHasher;
  readonly credentials: CredentialValidator;
  /** The permission engine (bearer tokens of this server), as used by the administration API. */
  readonly authorization: AuthorizationService;
  /** Verifies this server's access tokens (for resource servers in the same process). */
  readonly tokenVerifier: TokenVerifier;
  /** Mutable OAuth settings (set `issuer` after listening on an ephemeral port). */
  readonly config: ReturnType<typeof resolveOAuthConfig>;
  readonly bootstrap: BootstrapResult;
  /** The server's metrics (served at `GET /metrics`); undefined with `metrics: false`. */
  readonly metrics: AuthMetrics | undefined;
  /** The brute-force limits (TOTP and reset checks call `limits.consume`); undefined with `rateLimits: false`. */
  readonly limits: RateLimits | undefined;
  /** Listens and, when no issuer was configured, sets it to `http://<host>:<port>`. @returns the base URL. */
  listen(port?: number, host?: string): Promise<string>;
}

/**
 * Builds the server: opens the store, loads or creates the signing key, seeds an empty store, registers
 * the OAuth routes and the login page.
 * @throws RangeError for invalid settings (naming the field).
 */
export async function buildAuthServer(options: AuthServerOptions = {}): Promise<AuthServer> {
  const now = options.now ?? Date.now;
  const config = resolveOAuthConfig(options.oauth);
  let store = options.store;
  if (!store && options.databaseUrl !== undefined) {
    store = await PostgresAuthStore.open({ url: options.databaseUrl, now });
  }
  if (!store) {
    const path = options.databasePath ?? DEFAULT_DATABASE_PATH;
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    // WAL checkpoints (copy into the database file + fsync) run every 200 ms in a worker thread on its own
    // connection, off the event loop; each refresh rotation writes a few WAL pages. The connection's own
    // automatic checkpoint stays as a backstop at 40 000 pages (160 MiB of WAL), reached only if the
    // worker falls behind. Measured with `npm run bench:oauth`: p99 of the refresh grant 41 → 13 ms.
    store = new SqliteAuthStore({
      path,
      now,
      walAutocheckpointPages: 40_000,
      backgroundCheckpointMs: 200,
    });
  }
  const hasher = new PasswordHasher(options.hashParams ? { params: options.hashParams } : {});
  const metrics = options.metrics === false ? undefined : new AuthMetrics();
  let limits: RateLimits | undefined;
  if (options.rateLimits !== false) {
    const settings = resolveRateLimits(options.rateLimits);
    limits = store.rateLimitClient
      ? RateLimits.postgres(store.rateLimitClient(), settings)
      : RateLimits.memory(settings);
    if (metrics) limits.onRefused(metrics.rateLimitRefused);
  }
  const credentials = new CredentialValidator({
    store,
    hasher,
    now,
    maxAccessFailedCount: options.maxAccessFailedCount,
    lockoutDurationMs: options.lockoutDurationMs,
    onValidated: metrics?.credentialValidated,
  });
  const keys = new KeyManager(store, {
    alg: options.signingAlg,
    retiredKeyTtlMs: Math.max(24 * 3600_000, config.accessTokenTtlSeconds * 2000),
    now,
  });
  await keys.init();
  // Another instance's key rotation (a shared PostgreSQL store announces it) is picked up at once: the
  // JWKS of every instance lists the new key and its tokens verify everywhere.
  const unwatchKeys = await store.watchSigningKeys?.(() => void keys.rotateIfDue().catch(() => {}));
  const adminBasePath = options.adminBasePath ?? '/auth-admin';
  // maxParamLength and frameworkErrors as the administration API needs them (long ids, spec error body).
  const proxies = new TrustedProxies(options.trustedProxies ?? [], 'trustedProxies');
  const app = Fastify({
    logger: options.logger ?? false,
    trustProxy: false,
    ...adminServerOptions(adminBasePath),
  });
  trustProxiesFor(app, proxies);
  if (metrics) await app.register(metricsPlugin, { metrics });
  const upstreamProviders = resolveUpstreamProviders(options.upstreamProviders);
  await app.register(oauthServer, {
    config,
    store,
    keys,
    credentials,
    hasher,
    now,
    limits,
    upstreamProviders,
  });
  registerHealthRoutes(app, store);
  const tokenVerifier = new IssuerTokenVerifier(config, keys, now, createDpopVerifier(config, store, now));
  // Denials (of guests too) are audited as `Authorization` / `Denied` events.
  const authorization = new AuthorizationService({ store, tokenVerifier, now, auditDenials: true });
  await app.register(adminApi, {
    basePath: adminBasePath,
    store,
    authorization,
    passwordHasher: hasher,
    clientSecretKey: config.clientSecretKey,
    now,
  });
  const ownedStore = store;
  // Scheduled key rotation (two-phase: publish, then sign); best effort, retried on the next tick.
  const rotation = setInterval(() => keys.rotateIfDue().catch(() => {}), 60_000);
  rotation.unref();
  app.addHook('onClose', async () => clearInterval(rotation));
  if (unwatchKeys) app.addHook('onClose', unwatchKeys);
  if (options.closeStore !== false) app.addHook('onClose', async () => ownedStore.close());

  let bootstrap: BootstrapResult = { clients: [] };
  const seed = async (issuer: string) => {
    bootstrap = await bootstrapStore(ownedStore, hasher, issuer, options.bootstrap, adminBasePath);
  };
  if (config.issuer !== '') await seed(config.issuer);

  return {
    app,
    store,
    keys,
    hasher,
    credentials,
    authorization,
    tokenVerifier,
    config,
    metrics,
    limits,
    get bootstrap() {
      return bootstrap;
    },
    async listen(port = DEFAULT_AUTH_PORT, host = '127.0.0.1') {
      await app.listen({ port, host });
      const address = app.server.address();
      const actualPort = typeof address === 'object' && address ? address.port : port;
      const base = `http://${host.includes(':') ? `[${host}]` : host}:${actualPort}`;
      if (config.issuer === '') {
        config.issuer = base;
        await seed(base);
      }
      return base;
    },
  };
}

/**
 * The core's {@link JwtTokenVerifier} over this server's current keys, created on first use so that an
 * issuer fixed after `listen()` is honoured; requires `typ: at+jwt`, the issuer and the audience
 * (RFC 9068 §4).
 */
class IssuerTokenVerifier implements TokenVerifier {
  readonly #config: ReturnType<typeof resolveOAuthConfig>;
  readonly #keys: KeyManager;
  readonly #now: () => number;
  #verifier: JwtTokenVerifier | undefined;
  #issuer = '';

  readonly #dpop: DpopProofVerifier | undefined;

  constructor(
    config: ReturnType<typeof resolveOAuthConfig>,
    keys: KeyManager,
    now: () => number,
    dpop: DpopProofVerifier | undefined,
  ) {
    this.#config = config;
    this.#keys = keys;
    this.#now = now;
    this.#dpop = dpop;
  }

  verify(token: string, presentation?: TokenPresentation): Promise<VerifiedToken> {
    if (!this.#verifier || this.#issuer !== this.#config.issuer) {
      this.#issuer = this.#config.issuer;
      this.#verifier = new JwtTokenVerifier({
        key: this.#keys.keyGetter(),
        issuer: this.#issuer,
        audience: this.#config.audience,
        typ: 'at+jwt',
        now: this.#now,
        dpop: this.#dpop,
      });
    }
    return this.#verifier.verify(token, presentation);
  }
}
