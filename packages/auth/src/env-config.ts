/**
 * The auth server's settings read from the environment ({@link configFromEnv}): every `AUTH_*` variable the
 * `auth-server` command honours, checked so that a bad value fails at start naming the variable.
 */
import {
  resolveUpstreamProviders,
  type UpstreamProviderConfig,
  upstreamProvidersFromEnv,
} from './broker/config.ts';
import { TrustedProxies } from './client-address.ts';
import { MIN_MFA_KEY_LENGTH } from './mfa/seal.ts';
import { type SigningAlg, SUPPORTED_SIGNING_ALGS } from './oauth/keys.ts';
import { rateLimitsFromEnv } from './ratelimit.ts';
import { type AuthServerOptions, DEFAULT_AUTH_PORT, DEFAULT_DATABASE_PATH } from './server.ts';
import { checkPostgresUrl } from './store/postgres.ts';

/** `AUTH_UPSTREAM_PROVIDERS`, checked (so a bad value fails at start, naming the field). */
function envUpstreamProviders(env: NodeJS.ProcessEnv): UpstreamProviderConfig[] | undefined {
  const raw = upstreamProvidersFromEnv(env);
  if (raw === undefined) return undefined;
  resolveUpstreamProviders(raw);
  return raw as UpstreamProviderConfig[];
}

/** Settings read from the environment by {@link configFromEnv}. */
export interface EnvConfig {
  readonly port: number;
  readonly host: string;
  readonly options: AuthServerOptions;
}

/**
 * Reads `AUTH_PORT` (default 4100), `AUTH_HOST` (default `localhost`: loopback, IPv4 and IPv6), `AUTH_ISSUER` (default
 * `http://localhost:<port>`), `AUTH_DATABASE_URL` (a `postgres://` URL: the PostgreSQL store; unset: SQLite),
 * `AUTH_DATABASE_PATH` (SQLite file, default {@link DEFAULT_DATABASE_PATH}),
 * `AUTH_SIGNING_ALG` (default `RS256`), `AUTH_ADMIN_USERNAME`, `AUTH_ADMIN_PASSWORD`,
 * `AUTH_DEMO_CLIENT_SECRET`, `AUTH_ACCESS_TOKEN_TTL` and `AUTH_REFRESH_TOKEN_TTL` (seconds), `AUTH_CLIENT_SECRET_KEY` (seals
 * the secrets of `client_secret_jwt` clients; without it that method is off), `AUTH_MFA_KEY` (at least 32
 * characters: seals TOTP seeds and the pending sign-in cookie; without it two-factor sign-in is off),
 * `AUTH_SMTP_URL` and `AUTH_MAIL_FROM` (self-service password reset and e-mail verification mail),
 * `AUTH_SELF_REGISTRATION` (`1`: anyone may create an account; needs `AUTH_SMTP_URL`).
 * @throws RangeError naming the variable when a value is invalid.
 */
export function configFromEnv(env: NodeJS.ProcessEnv = process.env): EnvConfig {
  const port =
    env.AUTH_PORT === undefined || env.AUTH_PORT === '' ? DEFAULT_AUTH_PORT : Number(env.AUTH_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new RangeError('AUTH_PORT: must be an integer 0-65535');
  const alg = env.AUTH_SIGNING_ALG || 'RS256';
  if (!(SUPPORTED_SIGNING_ALGS as readonly string[]).includes(alg)) {
    throw new RangeError(`AUTH_SIGNING_ALG: must be one of ${SUPPORTED_SIGNING_ALGS.join(', ')}`);
  }
  const seconds = (name: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n <= 0)
      throw new RangeError(`${name}: must be a positive integer (seconds)`);
    return n;
  };
  const host = env.AUTH_HOST || 'localhost';
  if (env.AUTH_MFA_KEY && env.AUTH_MFA_KEY.length < MIN_MFA_KEY_LENGTH)
    throw new RangeError(`AUTH_MFA_KEY: at least ${MIN_MFA_KEY_LENGTH} characters`);
  return {
    port,
    host,
    options: {
      databasePath: env.AUTH_DATABASE_PATH || DEFAULT_DATABASE_PATH,
      databaseUrl: env.AUTH_DATABASE_URL ? checkPostgresUrl(env.AUTH_DATABASE_URL) : undefined,
      signingAlg: alg as SigningAlg,
      oauth: {
        issuer: env.AUTH_ISSUER || `http://localhost:${port}`,
        accessTokenTtlSeconds: seconds('AUTH_ACCESS_TOKEN_TTL'),
        refreshTokenTtlSeconds: seconds('AUTH_REFRESH_TOKEN_TTL'),
        clientSecretKey: env.AUTH_CLIENT_SECRET_KEY || undefined,
        mfa: env.AUTH_MFA_KEY ? { key: env.AUTH_MFA_KEY } : undefined,
        selfService: env.AUTH_SMTP_URL
          ? {
              smtpUrl: env.AUTH_SMTP_URL,
              from: env.AUTH_MAIL_FROM || undefined,
              registration: env.AUTH_SELF_REGISTRATION === '1',
            }
          : undefined,
      },
      rateLimits: rateLimitsFromEnv(env),
      upstreamProviders: envUpstreamProviders(env),
      trustedProxies: env.AUTH_TRUSTED_PROXIES
        ? TrustedProxies.parse(env.AUTH_TRUSTED_PROXIES).entries
        : undefined,
      bootstrap: {
        adminUserName: env.AUTH_ADMIN_USERNAME || undefined,
        adminPassword: env.AUTH_ADMIN_PASSWORD || undefined,
        demoClientSecret: env.AUTH_DEMO_CLIENT_SECRET || undefined,
      },
    },
  };
}
