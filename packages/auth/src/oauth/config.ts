/**
 * Settings of the OAuth endpoints. Token lifetimes are not given by spec 001 ("token lifetimes: not
 * shown"); the defaults follow common practice and RFC 9700 (short access tokens, rotated refresh tokens,
 * authorization codes valid for at most a minute).
 */
import { resolveSelfService, type SelfServiceOptions, type SelfServiceSettings } from '../mail/mailer.ts';
import { type MfaOptions, type MfaSettings, resolveMfaConfig } from '../mfa/config.ts';
import { GRANT_TYPES, type GrantType } from '../store/types.ts';
import { MIN_CLIENT_SECRET_KEY_LENGTH } from './client-secrets.ts';

/** Options accepted by {@link resolveOAuthConfig}; every field is optional. */
export interface OAuthOptions {
  /**
   * Issuer identifier (RFC 8414 §2): `https` URL without query or fragment (`http` allowed for loopback).
   * May be set after `listen()` through {@link OAuthConfig.issuer} when the port is ephemeral.
   */
  issuer?: string;
  /** `aud` of access tokens (RFC 9068 §2.2). Default `seed`. */
  audience?: string;
  /** Access-token lifetime, seconds. Default 600. */
  accessTokenTtlSeconds?: number;
  /** Refresh-token lifetime, seconds (each rotated token gets a fresh one). Default 14 days. */
  refreshTokenTtlSeconds?: number;
  /** Authorization-code lifetime, seconds. Default 60. */
  authorizationCodeTtlSeconds?: number;
  /** Login-session lifetime, seconds. Default 8 hours. */
  sessionTtlSeconds?: number;
  /** Grant types enabled on the server; others answer `unsupported_grant_type`. Default: all of {@link GRANT_TYPES} (the four of RFC 6749, token exchange RFC 8693, device code RFC 8628). */
  grantTypes?: readonly GrantType[];
  /** Accept PKCE `plain` (RFC 7636 §4.2) for confidential clients. Default false (S256 only). */
  allowPlainPkce?: boolean;
  /** DPoP (RFC 9449) at the token endpoint and in the permission middleware; `false` turns it off. */
  dpop?: DpopOptions | false;
  /** Device authorization grant (RFC 8628) settings. */
  device?: DeviceOptions;
  /** Pushed authorization requests (RFC 9126); `false` turns the endpoint off. */
  par?: ParOptions | false;
  /** Dynamic client registration (RFC 7591/7592); off unless given. */
  registration?: RegistrationOptions;
  /** Two-factor sign-in (TOTP); off without `mfa.key` (see `../mfa/config.ts`). */
  mfa?: MfaOptions;
  /** Self-service mail (password reset, e-mail verification); off without `selfService.smtpUrl`. */
  selfService?: SelfServiceOptions;
  /**
   * The server's client-secret key (`AUTH_CLIENT_SECRET_KEY`, at least 32 characters, e.g. 32 random bytes
   * in base64url): seals the secrets of `client_secret_jwt` clients at rest (AES-256-GCM, see
   * `client-secrets.ts`). Without it `client_secret_jwt` is unavailable and not advertised. Every server
   * instance over one store needs the same key; changing it makes sealed secrets unusable until rotated.
   */
  clientSecretKey?: string;
}

/**
 * Dynamic client registration policy (RFC 7591 §3, RFC 7592). Registration needs one of the initial access
 * tokens, unless `open` is true; registered clients get at most `grantTypes` and `scopes`.
 */
export interface RegistrationOptions {
  /** Initial access tokens (RFC 7591 §1.2, `Authorization: Bearer`), each at least 16 characters. */
  initialAccessTokens?: readonly string[];
  /** Anyone may register (no initial access token). Default false. */
  open?: boolean;
  /** Grant types a registered client may ask for. Default `authorization_code`, `refresh_token`, `client_credentials`. */
  grantTypes?: readonly GrantType[];
  /** Scopes a registered client may ask for. Default `openid`, `profile`, `offline_access`. */
  scopes?: readonly string[];
}

/** Device authorization grant settings (RFC 8628). */
export interface DeviceOptions {
  /** Lifetime of device and user codes, seconds (§3.2 `expires_in`). Default 600. */
  codeTtlSeconds?: number;
  /** Minimum polling interval, seconds (§3.2 `interval`). Default 5. */
  intervalSeconds?: number;
}

/** Pushed authorization request settings (RFC 9126). */
export interface ParOptions {
  /** Every client must push its authorization requests (`require_pushed_authorization_requests`, §5). Default false. */
  requirePushedAuthorizationRequests?: boolean;
  /** Lifetime of a `request_uri`, seconds (§2.2 `expires_in`). Default 60. */
  requestUriTtlSeconds?: number;
}

/** DPoP settings (RFC 9449). */
export interface DpopOptions {
  /** Require a server nonce (§8) in every proof. Default false. */
  requireNonce?: boolean;
  /**
   * HMAC key of the stateless nonces (at least 16 bytes). Server instances behind one issuer must share it
   * (`AUTH_DPOP_NONCE_SECRET`); default: random per process.
   */
  nonceSecret?: string;
  /** Oldest accepted proof `iat`, seconds. Default 300. */
  proofMaxAgeSeconds?: number;
  /** Tolerated clock difference for `iat`, seconds. Default 5. */
  clockSkewSeconds?: number;
}

/** The resolved settings (mutable `issuer` so it can be fixed once the listening port is known). */
export interface OAuthConfig {
  issuer: string;
  readonly audience: string;
  readonly accessTokenTtlSeconds: number;
  readonly refreshTokenTtlSeconds: number;
  readonly authorizationCodeTtlSeconds: number;
  readonly sessionTtlSeconds: number;
  readonly grantTypes: readonly GrantType[];
  readonly allowPlainPkce: boolean;
  /** DPoP settings, or null when DPoP is off (then it is not advertised and `DPoP` headers are ignored). */
  readonly dpop: (Required<Omit<DpopOptions, 'nonceSecret'>> & { readonly nonceSecret?: string }) | null;
  /** Device grant settings (the grant itself is on when its grant type is in `grantTypes`). */
  readonly device: Readonly<Required<DeviceOptions>>;
  /** Registration policy, or null when dynamic registration is off (then it is not advertised). */
  readonly registration: Readonly<Required<RegistrationOptions>> | null;
  /** PAR settings, or null when the PAR endpoint is off (then it is not advertised). */
  readonly par: Readonly<Required<ParOptions>> | null;
  /** The client-secret key, or undefined when `client_secret_jwt` is off. */
  readonly clientSecretKey: string | undefined;
  /** Two-factor sign-in settings, or null when TOTP is off (no MFA key). */
  readonly mfa: MfaSettings | null;
  /** Self-service settings, or null when self-service mail is off (no SMTP URL). */
  readonly selfService: SelfServiceSettings | null;
}

function positiveInt(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v <= 0)
    throw new RangeError(`${name}: must be a positive integer (seconds)`);
  return v;
}

/**
 * Fills defaults and validates.
 * @throws RangeError naming the field when a lifetime is not a positive integer or the issuer is not an
 * absolute http(s) URL without query and fragment.
 */
export function resolveOAuthConfig(options: OAuthOptions = {}): OAuthConfig {
  const issuer = options.issuer ?? '';
  if (issuer !== '') validateIssuer(issuer);
  return {
    issuer,
    audience: options.audience ?? 'seed',
    accessTokenTtlSeconds: positiveInt('accessTokenTtlSeconds', options.accessTokenTtlSeconds, 600),
    refreshTokenTtlSeconds: positiveInt(
      'refreshTokenTtlSeconds',
      options.refreshTokenTtlSeconds,
      14 * 24 * 3600,
    ),
    authorizationCodeTtlSeconds: positiveInt(
      'authorizationCodeTtlSeconds',
      options.authorizationCodeTtlSeconds,
      60,
    ),
    sessionTtlSeconds: positiveInt('sessionTtlSeconds', options.sessionTtlSeconds, 8 * 3600),
    grantTypes: options.grantTypes ?? [...GRANT_TYPES],
    allowPlainPkce: options.allowPlainPkce ?? false,
    dpop:
      options.dpop === false
        ? null
        : {
            requireNonce: options.dpop?.requireNonce ?? false,
            nonceSecret: options.dpop?.nonceSecret,
            proofMaxAgeSeconds: positiveInt('dpop.proofMaxAgeSeconds', options.dpop?.proofMaxAgeSeconds, 300),
            clockSkewSeconds: positiveInt('dpop.clockSkewSeconds', options.dpop?.clockSkewSeconds, 5),
          },
    device: {
      codeTtlSeconds: positiveInt('device.codeTtlSeconds', options.device?.codeTtlSeconds, 600),
      intervalSeconds: positiveInt('device.intervalSeconds', options.device?.intervalSeconds, 5),
    },
    registration: resolveRegistration(options.registration),
    par:
      options.par === false
        ? null
        : {
            requirePushedAuthorizationRequests: options.par?.requirePushedAuthorizationRequests ?? false,
            requestUriTtlSeconds: positiveInt(
              'par.requestUriTtlSeconds',
              options.par?.requestUriTtlSeconds,
              60,
            ),
          },
    clientSecretKey: resolveClientSecretKey(options.clientSecretKey),
    mfa: resolveMfaConfig(options.mfa),
    selfService: resolveSelfService(options.selfService),
  };
}

function resolveClientSecretKey(key: string | undefined): string | undefined {
  if (key === undefined || key === '') return undefined;
  if (typeof key !== 'string' || key.length < MIN_CLIENT_SECRET_KEY_LENGTH)
    throw new RangeError(`clientSecretKey: at least ${MIN_CLIENT_SECRET_KEY_LENGTH} characters`);
  return key;
}

function resolveRegistration(options: RegistrationOptions | undefined): Required<RegistrationOptions> | null {
  if (!options) return null;
  const tokens = options.initialAccessTokens ?? [];
  if (tokens.some((t) => typeof t !== 'string' || t.length < 16))
    throw new RangeError('registration.initialAccessTokens: strings of at least 16 characters');
  if (!options.open && tokens.length === 0)
    throw new RangeError('registration: give initialAccessTokens, or open: true');
  return {
    initialAccessTokens: [...tokens],
    open: options.open ?? false,
    grantTypes: [...(options.grantTypes ?? ['authorization_code', 'refresh_token', 'client_credentials'])],
    scopes: [...(options.scopes ?? ['openid', 'profile', 'offline_access'])],
  };
}

/**
 * Checks an issuer identifier (RFC 8414 §2): absolute `http`/`https` URL, no query, no fragment, no
 * trailing slash. @throws RangeError naming the rule.
 */
export function validateIssuer(issuer: string): void {
  let url: URL;
  try {
    url = new URL(issuer);
  } catch {
    throw new RangeError(`issuer: '${issuer}' is not an absolute URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new RangeError('issuer: must use http or https');
  if (url.search || url.hash || issuer.includes('?') || issuer.includes('#')) {
    throw new RangeError('issuer: must not have a query or fragment (RFC 8414 §2)');
  }
  if (issuer.endsWith('/')) throw new RangeError('issuer: must not end with a slash');
}
