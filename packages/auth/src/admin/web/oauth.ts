/**
 * Sign-in of the admin page: the server's own OAuth 2.0 authorization-code flow with PKCE S256 (RFC 6749 §4.1,
 * RFC 7636) as a public client, RFC 9207 issuer check, refresh (RFC 6749 §6), revocation (RFC 7009) and
 * RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0). Tokens are kept in sessionStorage.
 */
import { CLIENT_ID, REDIRECT_URI, SCOPE } from './config.ts';
import { status } from './dom.ts';

const TOKENS_KEY = 'seed-auth-admin.tokens';
const PKCE_KEY = 'seed-auth-admin.pkce';

/** The tokens of the signed-in administrator; `expiresAt` in ms since the epoch. */
export interface Tokens {
  accessToken: string;
  refreshToken: string | null;
  idToken: string | null;
  expiresAt: number;
}

/** The endpoints of this server the page uses (paths on the page's origin). */
interface Endpoints {
  issuer: string | undefined;
  authorize: string;
  token: string;
  revoke: string;
  endSession: string;
}

/** The fields of OpenID Provider metadata (OpenID Connect Discovery 1.0 §3) the page reads. */
interface ProviderMetadata {
  issuer?: string;
  authorization_endpoint?: string;
  token_endpoint?: string;
  revocation_endpoint?: string;
  end_session_endpoint?: string;
}

/** A token endpoint answer (RFC 6749 §5.1) or error (§5.2). */
interface TokenAnswer {
  access_token?: string;
  refresh_token?: string;
  id_token?: string;
  expires_in?: number;
  error?: string;
  error_description?: string;
}

function base64url(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
const randomToken = (): string => base64url(crypto.getRandomValues(new Uint8Array(32)));
async function s256(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

let endpoints: Endpoints | undefined;
/** The server's endpoints from its discovery document, or the defaults when it cannot be read. */
async function discover(): Promise<Endpoints> {
  if (endpoints) return endpoints;
  const defaults: Endpoints = {
    issuer: undefined,
    authorize: '/connect/authorize',
    token: '/connect/token',
    revoke: '/connect/revocation',
    endSession: '/connect/endsession',
  };
  endpoints = defaults;
  try {
    const res = await fetch('/.well-known/openid-configuration');
    if (res.ok) {
      const meta = (await res.json()) as ProviderMetadata;
      // Same origin as this page (the redirect URI is registered for it).
      const path = (url: string | undefined, fallback: string) => (url ? new URL(url).pathname : fallback);
      endpoints = {
        issuer: meta.issuer,
        authorize: path(meta.authorization_endpoint, defaults.authorize),
        token: path(meta.token_endpoint, defaults.token),
        revoke: path(meta.revocation_endpoint, defaults.revoke),
        endSession: path(meta.end_session_endpoint, defaults.endSession),
      };
    }
  } catch {
    // keep the defaults
  }
  return endpoints;
}

/** Starts a sign-in: sends the browser to the authorization endpoint. */
export async function signIn(): Promise<void> {
  const { authorize } = await discover();
  const verifier = randomToken();
  const state = randomToken();
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
  const params = new URLSearchParams({
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    scope: SCOPE,
    state,
    code_challenge: await s256(verifier),
    code_challenge_method: 'S256',
  });
  location.assign(`${authorize}?${params}`);
}

function saveTokens(body: TokenAnswer): Tokens {
  const previous = tokens();
  const saved: Tokens = {
    accessToken: body.access_token ?? '',
    refreshToken: body.refresh_token ?? null,
    idToken: body.id_token ?? previous?.idToken ?? null,
    expiresAt: Date.now() + (Number(body.expires_in) || 300) * 1000,
  };
  sessionStorage.setItem(TOKENS_KEY, JSON.stringify(saved));
  return saved;
}

/** The stored tokens, or null when signed out. */
export function tokens(): Tokens | null {
  try {
    return JSON.parse(sessionStorage.getItem(TOKENS_KEY) ?? 'null') as Tokens | null;
  } catch {
    return null;
  }
}

/** Forgets the stored tokens (the page shows the signed-out view on its next render). */
export function forgetTokens(): void {
  sessionStorage.removeItem(TOKENS_KEY);
}

/** A token request with `form`; stores and returns the tokens. @throws Error naming the OAuth error. */
async function tokenRequest(form: Record<string, string>): Promise<Tokens> {
  const { token } = await discover();
  const res = await fetch(token, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ client_id: CLIENT_ID, ...form }),
  });
  const body = (await res.json().catch(() => ({}))) as TokenAnswer;
  if (!res.ok)
    throw new Error(`${body.error ?? res.status}: ${body.error_description ?? 'token request failed'}`);
  return saveTokens(body);
}

/** Refreshes the access token with `refreshToken`. @throws Error when the token endpoint refuses. */
export function refresh(refreshToken: string): Promise<Tokens> {
  return tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken });
}

/** Completes the flow when the authorization server redirected back here with `code` (or `error`). */
export async function handleCallback(): Promise<void> {
  const params = new URLSearchParams(location.search);
  if (!params.has('code') && !params.has('error')) return;
  history.replaceState(null, '', REDIRECT_URI);
  let pending: { verifier: string; state: string } | null = null;
  try {
    pending = JSON.parse(sessionStorage.getItem(PKCE_KEY) ?? 'null');
  } catch {
    pending = null;
  }
  sessionStorage.removeItem(PKCE_KEY);
  if (params.has('error')) {
    status(`Sign-in failed: ${params.get('error')} ${params.get('error_description') ?? ''}`, 'error');
    return;
  }
  if (!pending || params.get('state') !== pending.state) {
    status('Sign-in failed: the answer does not belong to a sign-in started here (state mismatch).', 'error');
    return;
  }
  const { issuer } = await discover();
  if (params.has('iss') && issuer && params.get('iss') !== issuer) {
    // RFC 9207 §2.4: an answer from another authorization server (mix-up attack) is refused.
    status('Sign-in failed: the answer comes from another authorization server (iss mismatch).', 'error');
    return;
  }
  try {
    await tokenRequest({
      grant_type: 'authorization_code',
      code: params.get('code') ?? '',
      redirect_uri: REDIRECT_URI,
      code_verifier: pending.verifier,
    });
  } catch (error) {
    status(`Sign-in failed: ${(error as Error).message}`, 'error');
  }
}

/** Signs out: revokes the refresh token, then ends the server's login session and comes back here. */
export async function signOut(): Promise<void> {
  const current = tokens();
  forgetTokens();
  if (current?.refreshToken) {
    const { revoke } = await discover();
    await fetch(revoke, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: CLIENT_ID,
        token: current.refreshToken,
        token_type_hint: 'refresh_token',
      }),
    }).catch(() => undefined);
  }
  // RP-initiated logout: ends the login page's session too, then the server sends the browser back here.
  const { endSession } = await discover();
  const params = new URLSearchParams({ client_id: CLIENT_ID, post_logout_redirect_uri: REDIRECT_URI });
  if (current?.idToken) params.set('id_token_hint', current.idToken);
  location.assign(`${endSession}?${params}`);
}

/** The `sub` claim of a JWT access token (read without verification, for display only). */
export function subjectOf(accessToken: string): string | undefined {
  try {
    const payload = (accessToken.split('.')[1] ?? '').replace(/-/g, '+').replace(/_/g, '/');
    return (JSON.parse(atob(payload)) as { sub?: string }).sub;
  } catch {
    return undefined;
  }
}
