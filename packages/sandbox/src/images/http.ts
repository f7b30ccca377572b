/**
 * Minimal HTTP(S) client for the OCI Distribution API: node:http/node:https so that per-registry TLS
 * verification (`skipVerify`) and streaming bodies work without extra dependencies.
 */
import http from 'node:http';
import https from 'node:https';
import type { Readable } from 'node:stream';

/** Options of one request. `body` is sent as is; `rejectUnauthorized` false skips TLS verification. */
export interface HttpRequestOptions {
  method?: string;
  headers?: Record<string, string>;
  body?: Buffer | Readable | string;
  signal?: AbortSignal;
  rejectUnauthorized?: boolean;
  /** Socket idle timeout, ms (default 60000). */
  timeoutMs?: number;
}

const agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
const insecureAgent = new https.Agent({ keepAlive: true, rejectUnauthorized: false });

/**
 * Sends one request and resolves with the response once its headers arrive; the body is left
 * unread (a Readable). Rejects on network errors, timeouts and aborts (no retries here).
 */
export function httpRequest(url: URL, options: HttpRequestOptions = {}): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const isHttps = url.protocol === 'https:';
    const mod = isHttps ? https : http;
    const agent = isHttps
      ? options.rejectUnauthorized === false
        ? insecureAgent
        : agents.https
      : agents.http;
    const req = mod.request(url, {
      method: options.method ?? 'GET',
      headers: options.headers,
      agent,
      signal: options.signal,
      timeout: options.timeoutMs ?? 60_000,
    });
    req.on('timeout', () => req.destroy(new Error(`timeout talking to ${url.host}`)));
    req.on('error', reject);
    req.on('response', resolve);
    const body = options.body;
    if (body === undefined) req.end();
    else if (typeof body === 'string' || Buffer.isBuffer(body)) req.end(body);
    else {
      body.on('error', (e) => req.destroy(e));
      body.pipe(req);
    }
  });
}

/** Reads a whole response body into one Buffer, failing beyond `limit` bytes (default 16 MiB). */
export async function readBody(res: Readable, limit = 16 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      res.destroy();
      throw new Error(`response body larger than ${limit} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
