/**
 * Registration and authentication ceremonies (WebAuthn Level 3 §7.1, §7.2) with `@simplewebauthn/server`:
 * options for the browser and verification of its answers against the challenge, the RP ID hash, the
 * origin, user presence and (for passwordless sign-in) user verification, the signature over the
 * authenticator data, and the signature counter (§6.1.1: a counter that does not grow means a cloned
 * authenticator; the library refuses it). Discoverable credentials (`residentKey: 'required'`) are
 * registered so that a passkey alone names its user.
 */

import type { AuthenticatorTransport } from '@simplewebauthn/server';
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import type { PasskeyRecord } from '../store/passkeys.ts';
import type { UserRecord } from '../store/types.ts';
import { CHALLENGE_TTL_SECONDS } from './challenge.ts';
import type { RelyingParty } from './relying-party.ts';

const transports = (list: readonly string[]) => list as AuthenticatorTransport[];

/** Options of `navigator.credentials.create()` for `user`, excluding the passkeys it already has. */
export function registrationOptions(
  rp: RelyingParty,
  user: UserRecord,
  existing: readonly PasskeyRecord[],
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  return generateRegistrationOptions({
    rpName: rp.rpName,
    rpID: rp.rpId,
    userName: user.userName,
    userID: new TextEncoder().encode(user.id),
    userDisplayName: user.displayName ?? user.userName,
    attestationType: 'none',
    timeout: CHALLENGE_TTL_SECONDS * 1000,
    excludeCredentials: existing.map((p) => ({ id: p.id, transports: transports(p.transports) })),
    authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
  });
}

/**
 * Options of `navigator.credentials.get()`: for a known user its passkeys (second factor), otherwise none
 * listed (a discoverable credential names its user; conditional UI autofill).
 */
export function authenticationOptions(
  rp: RelyingParty,
  allowed: readonly PasskeyRecord[] | undefined,
): Promise<PublicKeyCredentialRequestOptionsJSON> {
  return generateAuthenticationOptions({
    rpID: rp.rpId,
    timeout: CHALLENGE_TTL_SECONDS * 1000,
    userVerification: allowed ? 'preferred' : 'required',
    allowCredentials: allowed?.map((p) => ({ id: p.id, transports: transports(p.transports) })),
  });
}

/** A verified registration: what to store. */
export interface VerifiedRegistration {
  readonly id: string;
  /** COSE public key, base64url. */
  readonly publicKey: string;
  readonly counter: number;
  readonly transports: readonly string[];
  readonly deviceType: string;
  readonly backedUp: boolean;
}

/**
 * Verifies a registration response. @throws Error with the library's reason (wrong challenge, origin, RP
 * ID, no user verification, malformed attestation).
 */
export async function verifyRegistration(
  rp: RelyingParty,
  response: RegistrationResponseJSON,
  challenge: string,
): Promise<VerifiedRegistration> {
  const result = await verifyRegistrationResponse({
    response,
    expectedChallenge: challenge,
    expectedOrigin: [...rp.origins],
    expectedRPID: rp.rpId,
    requireUserVerification: true,
  });
  if (!result.verified || !result.registrationInfo) throw new Error('registration not verified');
  const info = result.registrationInfo;
  return {
    id: info.credential.id,
    publicKey: Buffer.from(info.credential.publicKey).toString('base64url'),
    counter: info.credential.counter,
    transports: info.credential.transports ?? response.response.transports ?? [],
    deviceType: info.credentialDeviceType,
    backedUp: info.credentialBackedUp,
  };
}

/** A verified assertion. */
export interface VerifiedAssertion {
  readonly newCounter: number;
  readonly userVerified: boolean;
  readonly backedUp: boolean;
}

/**
 * Verifies an authentication response made with `passkey`. @throws Error with the library's reason
 * (wrong challenge, origin, RP ID hash, signature, counter not above the stored one, no user verification
 * when `requireUserVerification`).
 */
export async function verifyAssertion(
  rp: RelyingParty,
  response: AuthenticationResponseJSON,
  challenge: string,
  passkey: PasskeyRecord,
  requireUserVerification: boolean,
): Promise<VerifiedAssertion> {
  const result = await verifyAuthenticationResponse({
    response,
    expectedChallenge: challenge,
    expectedOrigin: [...rp.origins],
    expectedRPID: rp.rpId,
    credential: {
      id: passkey.id,
      publicKey: new Uint8Array(Buffer.from(passkey.publicKey, 'base64url')),
      counter: passkey.counter,
      transports: transports(passkey.transports),
    },
    requireUserVerification,
  });
  if (!result.verified) throw new Error('assertion not verified');
  return {
    newCounter: result.authenticationInfo.newCounter,
    userVerified: result.authenticationInfo.userVerified,
    backedUp: result.authenticationInfo.credentialBackedUp,
  };
}
