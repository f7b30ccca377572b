/**
 * Device Authorization Grant (RFC 8628): the device authorization endpoint `POST /connect/device` (§3.1–3.2)
 * and the token endpoint's `urn:ietf:params:oauth:grant-type:device_code` grant (§3.4–3.5) with its polling
 * errors `authorization_pending`, `slow_down`, `access_denied` and `expired_token`. The user's step is the
 * verification page (`device-page.ts`).
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ClientRecord, UserRecord } from '../store/types.ts';
import { type OAuthContext, userActive } from './context.ts';
import { OAuthError, oauthErrorHandler, sendOAuthError, setNoStore } from './errors.ts';
import { type FormParams, registerFormParser, requiredParam, requireForm } from './form.ts';
import { resolveScope } from './scope.ts';
import { hashToken } from './tokens.ts';

/** The grant type of RFC 8628 §3.4. */
export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
/** Path of the device authorization endpoint. */
export const DEVICE_AUTHORIZATION_PATH = '/connect/device';
/** Path of the verification page (`verification_uri`). */
export const DEVICE_VERIFICATION_PATH = '/device';

/** User-code alphabet (RFC 8628 §6.1): 20 consonants, no vowels (no words), no look-alike characters. */
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
/** User-code length: 20^8 ≈ 2^34.5 codes. */
const USER_CODE_LENGTH = 8;

/** A fresh user code, stored form (`BDWPHQKN`); shown to users as `BDWP-HQKN`. */
export function newUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

/** A user code as shown to the user: two groups of four separated by a dash. */
export function displayUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/**
 * Normalizes what a user typed (RFC 8628 §6.1: case-insensitive, separators ignored).
 * @returns the stored form, or undefined when it cannot be a user code.
 */
export function normalizeUserCode(input: unknown): string | undefined {
  if (typeof input !== 'string' || input.length > 32) return undefined;
  const code = input.toUpperCase().replace(/[\s-]/g, '');
  if (code.length !== USER_CODE_LENGTH) return undefined;
  for (const c of code) if (!USER_CODE_ALPHABET.includes(c)) return undefined;
  return code;
}

/** Registers `POST /connect/device` on an encapsulated context (form parser, OAuth error shape). */
export function registerDeviceAuthorizationEndpoint(app: FastifyInstance, ctx: OAuthContext): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    scope.setErrorHandler(oauthErrorHandler);
    scope.post(DEVICE_AUTHORIZATION_PATH, async (req, reply) => {
      try {
        const form = requireForm(req.body);
        const { client } = await ctx.clients.authenticate(req, form);
        const body = await startDeviceAuthorization(ctx, client, form);
        return setNoStore(reply).type('application/json; charset=utf-8').send(body);
      } catch (err) {
        if (err instanceof OAuthError) return sendOAuthError(reply, err);
        throw err;
      }
    });
  });
}

/**
 * RFC 8628 §3.1–3.2: checks the client may use the grant and the scope, stores the request and answers the
 * device code (256 random bits, stored hashed), the user code and where to enter it.
 * @throws OAuthError `unauthorized_client`, `invalid_scope`.
 */
async function startDeviceAuthorization(
  ctx: OAuthContext,
  client: ClientRecord,
  form: FormParams,
): Promise<Record<string, string | number>> {
  if (!client.allowedGrantTypes.includes(DEVICE_CODE_GRANT))
    throw new OAuthError('unauthorized_client', 'client is not allowed the device authorization grant');
  const scope = resolveScope(form.get('scope'), client.allowedScopes);
  const { codeTtlSeconds, intervalSeconds } = ctx.config.device;
  const deviceCode = randomBytes(32).toString('base64url');
  const now = ctx.now();
  let userCode = newUserCode();
  // A user code still in use is drawn again (unique constraint); with 20^8 codes this is rare.
  for (let attempt = 0; ; attempt++) {
    try {
      await ctx.store.insertDeviceCode({
        deviceCodeHash: hashToken(deviceCode),
        userCode,
        clientId: client.clientId,
        scope,
        intervalSeconds,
        createdAt: now,
        expiresAt: now + codeTtlSeconds * 1000,
      });
      break;
    } catch (error) {
      if (attempt >= 3) throw error;
      userCode = newUserCode();
    }
  }
  const verificationUri = `${ctx.config.issuer}${DEVICE_VERIFICATION_PATH}`;
  return {
    device_code: deviceCode,
    user_code: displayUserCode(userCode),
    verification_uri: verificationUri,
    verification_uri_complete: `${verificationUri}?${new URLSearchParams({ user_code: displayUserCode(userCode) })}`,
    expires_in: codeTtlSeconds,
    interval: intervalSeconds,
  };
}

/**
 * The device-code grant (RFC 8628 §3.4–3.5): @returns the approving user and the scope once the user
 * approved; the caller issues the tokens.
 * @throws OAuthError `invalid_request` (no `device_code`), `invalid_grant` (unknown code, another client's,
 * already used, user disabled), `expired_token`, `access_denied`, `slow_down` (polled faster than the
 * interval; the interval grows by 5 s), `authorization_pending`.
 */
export async function deviceCodeGrant(
  ctx: OAuthContext,
  client: ClientRecord,
  form: FormParams,
): Promise<{ user: UserRecord; scope: string; deviceCodeHash: string }> {
  const deviceCode = requiredParam(form, 'device_code');
  const now = ctx.now();
  const deviceCodeHash = hashToken(deviceCode);
  const polled = await ctx.store.pollDeviceCode(deviceCodeHash, now);
  if (!polled || polled.record.clientId !== client.clientId)
    throw new OAuthError('invalid_grant', 'device_code is invalid');
  const { record, slowDown } = polled;
  if (record.status === 'used') throw new OAuthError('invalid_grant', 'device_code was already used');
  if (record.expiresAt <= now) throw new OAuthError('expired_token', 'device_code expired');
  if (record.status === 'denied') throw new OAuthError('access_denied', 'the user denied the request');
  if (record.status === 'pending') {
    if (slowDown)
      throw new OAuthError('slow_down', `poll at most every ${record.intervalSeconds + 5} seconds`);
    throw new OAuthError('authorization_pending', 'the user has not decided yet');
  }
  const user = record.userId === null ? undefined : await ctx.store.getUser(record.userId);
  if (!user || !userActive(user, now))
    throw new OAuthError('invalid_grant', 'the user is missing or disabled');
  if (!(await ctx.store.consumeDeviceCode(deviceCodeHash)))
    throw new OAuthError('invalid_grant', 'device_code was already used');
  return { user, scope: record.scope, deviceCodeHash };
}
