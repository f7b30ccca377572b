/**
 * OCI Distribution API v2 client (OCI Distribution Spec v1.1 "Pull" and "Push" sections): authenticated
 * requests with the Docker token flow (`WWW-Authenticate: Bearer realm=…,service=…,scope=…`, Docker
 * "Token Authentication Specification"), HTTP Basic (RFC 7617), a ready bearer token (RFC 6750),
 * redirects for blob downloads, and retries on transient failures.
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { BoxError } from '../errors.ts';
import { httpRequest, readBody } from './http.ts';
import type { RegistryEndpoint } from './reference.ts';

/**
 * An HTTP-level failure from a registry; `status` is the HTTP status (0 for network errors). Its code
 * follows the status: 401 `unauthenticated`, 403 `permission_denied`, 404 `not_found`, else
 * `unavailable` (the image store reports pulls that fail with one as code `image`).
 */
export class RegistryError extends BoxError {
  readonly status: number;
  constructor(message: string, status: number, options?: ErrorOptions) {
    super(message, {
      ...options,
      code:
        status === 401
          ? 'unauthenticated'
          : status === 403
            ? 'permission_denied'
            : status === 404
              ? 'not_found'
              : 'unavailable',
    });
    this.name = 'RegistryError';
    this.status = status;
  }
}

/** Parses an RFC 7235 challenge like `Bearer realm="…",service="…"` into its scheme and parameters. */
export function parseChallenge(header: string): { scheme: string; params: Record<string, string> } {
  const m = /^\s*([A-Za-z][\w-]*)\s*(.*)$/.exec(header);
  if (!m) return { scheme: '', params: {} };
  const params: Record<string, string> = {};
  const re = /([\w-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))/g;
  for (let p = re.exec(m[2]!); p; p = re.exec(m[2]!)) {
    params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : (p[3] ?? '');
  }
  return { scheme: m[1]!.toLowerCase(), params };
}

const TRANSIENT_STATUS = new Set([408, 429, 500, 502, 503, 504]);
const TRANSIENT_CODES = new Set([
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ECONNABORTED',
  'UND_ERR_SOCKET',
]);

/** Whether an error from `RegistryClient` is worth retrying (network reset, 5xx, 429). */
export function isTransient(err: unknown): boolean {
  if (err instanceof RegistryError) return TRANSIENT_STATUS.has(err.status);
  const code = (err as { code?: string })?.code;
  return code !== undefined && TRANSIENT_CODES.has(code);
}

/** Options of `RegistryClient.request`. */
export interface RegistryRequest {
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer | Readable;
  signal?: AbortSignal;
  /** Token scope actions, `pull` (default) or `pull,push`. */
  actions?: string;
  /** Statuses accepted as success besides 2xx (e.g. 404 for an existence check). */
  accept?: number[];
  timeoutMs?: number;
}

/** A client of one registry host. Tokens are cached per repository scope for the client's lifetime. */
export class RegistryClient {
  readonly endpoint: RegistryEndpoint;
  private readonly tokens = new Map<string, string>();
  private basic: string | undefined;

  constructor(endpoint: RegistryEndpoint) {
    this.endpoint = endpoint;
    const a = endpoint.auth;
    if (a?.username !== undefined && a.password !== undefined) {
      this.basic = `Basic ${Buffer.from(`${a.username}:${a.password}`).toString('base64')}`;
    }
  }

  private authHeader(repository: string, actions: string): string | undefined {
    const key = `${repository}:${actions}`;
    const t = this.tokens.get(key);
    if (t) return t;
    if (this.endpoint.auth?.bearerToken) return `Bearer ${this.endpoint.auth.bearerToken}`;
    return undefined;
  }

  /** Answers a 401 challenge: caches the header to send next time. Throws `RegistryError` 401 when it cannot. */
  private async authenticate(challenge: string, repository: string, actions: string, signal?: AbortSignal) {
    const key = `${repository}:${actions}`;
    const { scheme, params } = parseChallenge(challenge);
    if (scheme === 'basic') {
      if (!this.basic)
        throw new RegistryError('authentication required (HTTP 401) and no credentials configured', 401);
      if (this.tokens.get(key) === this.basic)
        throw new RegistryError('credentials rejected (HTTP 401)', 401);
      this.tokens.set(key, this.basic);
      return;
    }
    if (scheme !== 'bearer' || !params.realm) {
      throw new RegistryError(`unsupported authentication challenge '${scheme}' (HTTP 401)`, 401);
    }
    const realm = new URL(params.realm);
    if (params.service) realm.searchParams.set('service', params.service);
    realm.searchParams.set('scope', params.scope ?? `repository:${repository}:${actions}`);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.basic) headers.authorization = this.basic;
    const res = await httpRequest(realm, {
      headers,
      signal,
      rejectUnauthorized: !this.endpoint.skipVerify,
      timeoutMs: 30_000,
    });
    const body = await readBody(res, 1024 * 1024);
    if (res.statusCode !== 200) {
      throw new RegistryError(
        `token request to ${realm.host} failed (HTTP ${res.statusCode})`,
        res.statusCode ?? 0,
      );
    }
    let token: string | undefined;
    try {
      const json = JSON.parse(body.toString('utf8')) as { token?: string; access_token?: string };
      token = json.token ?? json.access_token;
    } catch {
      // handled below
    }
    if (!token) throw new RegistryError(`token response from ${realm.host} has no token`, 401);
    const header = `Bearer ${token}`;
    if (this.tokens.get(key) === header) throw new RegistryError('token rejected (HTTP 401)', 401);
    this.tokens.set(key, header);
  }

  /**
   * Sends a request for `path` (below `/v2/`) of `repository`, handling auth challenges, redirects
   * (Authorization dropped across hosts) and, for bodiless requests, up to 3 retries on transient errors.
   * Resolves with a 2xx (or `accept`ed) response whose body is unread; rejects with `RegistryError`.
   */
  async request(repository: string, path: string, opts: RegistryRequest = {}): Promise<IncomingMessage> {
    const actions = opts.actions ?? 'pull';
    const replayable = opts.body === undefined || Buffer.isBuffer(opts.body);
    let url = new URL(path.startsWith('http') ? path : `${this.endpoint.baseUrl}/v2/${path}`);
    let attempt = 0;
    let redirects = 0;
    let authTries = 0;
    for (;;) {
      opts.signal?.throwIfAborted();
      const headers: Record<string, string> = { ...opts.headers };
      const sameHost = url.host === new URL(this.endpoint.baseUrl).host;
      const auth = sameHost ? this.authHeader(repository, actions) : undefined;
      if (auth) headers.authorization = auth;
      let res: IncomingMessage;
      try {
        res = await httpRequest(url, {
          method: opts.method,
          headers,
          body: opts.body,
          signal: opts.signal,
          rejectUnauthorized: !this.endpoint.skipVerify,
          timeoutMs: opts.timeoutMs,
        });
      } catch (err) {
        if (replayable && attempt < 3 && isTransient(err) && !opts.signal?.aborted) {
          await sleep(200 * 2 ** attempt++);
          continue;
        }
        const msg = (err as Error).message;
        throw new RegistryError(`cannot reach ${url.host}: ${msg}`, 0, { cause: err });
      }
      const status = res.statusCode ?? 0;
      if (status === 401 && sameHost && replayable && authTries < 2) {
        res.resume();
        authTries++;
        const challenge = res.headers['www-authenticate'];
        if (!challenge)
          throw new RegistryError('authentication required (HTTP 401) without a challenge', 401);
        await this.authenticate(String(challenge), repository, actions, opts.signal);
        continue;
      }
      if ([301, 302, 303, 307, 308].includes(status) && res.headers.location && redirects < 5) {
        res.resume();
        redirects++;
        url = new URL(res.headers.location, url);
        continue;
      }
      if ((status >= 200 && status < 300) || opts.accept?.includes(status)) return res;
      const body = await readBody(res, 64 * 1024).catch(() => Buffer.alloc(0));
      if (replayable && attempt < 3 && TRANSIENT_STATUS.has(status)) {
        await sleep(200 * 2 ** attempt++);
        continue;
      }
      throw new RegistryError(describe(status, body), status);
    }
  }
}

/** Human-readable failure from an HTTP status and an OCI error body (`{errors:[{code,message}]}`). */
function describe(status: number, body: Buffer): string {
  let detail = '';
  try {
    const json = JSON.parse(body.toString('utf8')) as { errors?: { code?: string; message?: string }[] };
    const e = json.errors?.[0];
    if (e) detail = `${e.code ?? ''}${e.message ? `: ${e.message}` : ''}`;
  } catch {
    // not JSON
  }
  const what =
    status === 401
      ? 'unauthorized'
      : status === 403
        ? 'forbidden'
        : status === 404
          ? 'not found'
          : status === 429
            ? 'too many requests'
            : 'request failed';
  return `${what} (HTTP ${status})${detail ? ` ${detail}` : ''}`;
}
