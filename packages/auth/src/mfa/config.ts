/**
 * Settings of two-factor sign-in and passkeys (`oauth.mfa` of the server options; `AUTH_MFA_KEY` in the
 * environment). Without a key, TOTP and passkeys are off: the login pages offer no enrolment, and a user for whom an administrator
 * requires a second factor cannot finish signing in (the page says so; the audit log says why).
 */
import { deriveKey, MIN_MFA_KEY_LENGTH, SecretSealer } from './seal.ts';

/** Options of two-factor sign-in. */
export interface MfaOptions {
  /**
   * The MFA key (at least 32 characters, e.g. 32 random bytes in base64url): TOTP seeds are sealed with it
   * at rest (AES-256-GCM, `./seal.ts`) and the pending sign-in cookie is encrypted with a key derived from
   * it. Every instance over one store needs the same key; changing it makes enrolled seeds unusable (their
   * users sign in with a recovery code and enrol again, or an administrator resets their factor).
   */
  key?: string;
  /** Issuer name shown in authenticator apps (the `issuer` of the key URI). Default `seed`. */
  totpIssuer?: string;
  /** How long the step between password and second factor may take, seconds. Default 300. */
  pendingTtlSeconds?: number;
  /** Passkeys (WebAuthn): the relying party when it differs from the issuer's host and origin. */
  passkeys?: PasskeyOptions;
}

/** Relying-party settings of passkeys (WebAuthn Level 3 §5.1.3, §13.4.9). */
export interface PasskeyOptions {
  /** RP ID (a host name, not an IP address). Default: the issuer's host name. */
  rpId?: string;
  /** Name authenticators show. Default: `totpIssuer`. */
  rpName?: string;
  /** Accepted origins (`https://host[:port]`). Default: the issuer's origin. */
  origins?: readonly string[];
}

/** Resolved settings; see {@link resolveMfaConfig}. */
export interface MfaSettings {
  /** Seals and opens TOTP seeds. */
  readonly sealer: SecretSealer;
  /** 256-bit key of the pending sign-in cookie (JWE `dir` + `A256GCM`). */
  readonly pendingKey: Uint8Array;
  readonly totpIssuer: string;
  readonly pendingTtlSeconds: number;
  /** Passkey relying-party overrides (empty: derived from the issuer). */
  readonly passkeys: Readonly<PasskeyOptions>;
}

/**
 * Checks the options. @returns the settings, or null when no key is given (TOTP off).
 * @throws RangeError naming the field (`mfa.key`: at least 32 characters; `mfa.totpIssuer`: 1-64
 * characters without `:`; `mfa.pendingTtlSeconds`: integer 30-3600; `mfa.passkeys.rpId`: a host name;
 * `mfa.passkeys.origins`: bare origins).
 */
export function resolveMfaConfig(options: MfaOptions | undefined): MfaSettings | null {
  if (options?.key === undefined || options.key === '') return null;
  if (options.key.length < MIN_MFA_KEY_LENGTH)
    throw new RangeError(`mfa.key: at least ${MIN_MFA_KEY_LENGTH} characters`);
  const totpIssuer = options.totpIssuer ?? 'seed';
  if (
    typeof totpIssuer !== 'string' ||
    totpIssuer.length < 1 ||
    totpIssuer.length > 64 ||
    totpIssuer.includes(':')
  )
    throw new RangeError('mfa.totpIssuer: 1-64 characters without ":"');
  const ttl = options.pendingTtlSeconds ?? 300;
  if (!Number.isSafeInteger(ttl) || ttl < 30 || ttl > 3600)
    throw new RangeError('mfa.pendingTtlSeconds: integer 30-3600 (seconds)');
  const passkeys = options.passkeys ?? {};
  if (passkeys.rpId !== undefined && !/^[a-z0-9.-]{1,253}$/i.test(passkeys.rpId))
    throw new RangeError('mfa.passkeys.rpId: a host name');
  for (const origin of passkeys.origins ?? []) {
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {}
    if (!url || url.origin !== origin)
      throw new RangeError('mfa.passkeys.origins: origins like https://host[:port]');
  }
  return {
    passkeys: { ...passkeys, origins: passkeys.origins ? [...passkeys.origins] : undefined },
    sealer: new SecretSealer(options.key),
    pendingKey: new Uint8Array(deriveKey(options.key, 'pending sign-in')),
    totpIssuer,
    pendingTtlSeconds: ttl,
  };
}
