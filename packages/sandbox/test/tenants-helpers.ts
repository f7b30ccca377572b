/**
 * Helpers of the shared-service tests (`tenants-*.test.ts`): a REST server with an operator key
 * over a fresh runtime, managed keys for tenants, and raw JSON requests.
 */
import type { JsRuntime } from '../src/index.ts';
import { type RestServer, type RestServerOptions, startRestServer } from '../src/rest/server.ts';
import { seededHome, testRuntime } from './runtime-helpers.ts';

/** The operator key of the test servers. */
export const OPERATOR_KEY = 'operator-key-0123456789abcdef';

/** An answer: status, headers and the parsed JSON body (null when empty, the text when not JSON). */
export interface Answer {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: answers are inspected field by field
  body: any;
}

/** A JSON (or raw) request as `key`'s holder; `body` objects are sent as JSON, buffers as bytes. */
export async function api(
  url: string,
  method: string,
  path: string,
  key: string | null,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const sent: Record<string, string> = { ...headers };
  if (key) sent.authorization = `Bearer ${key}`;
  let payload: string | Blob | undefined;
  if (Buffer.isBuffer(body)) {
    payload = new Blob([new Uint8Array(body)]);
    sent['content-type'] ??= 'application/octet-stream';
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    sent['content-type'] = 'application/json';
  }
  const response = await fetch(url + path, {
    method,
    headers: sent,
    ...(payload === undefined ? {} : { body: payload }),
  });
  const text = await response.text();
  let parsed: unknown = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  return { status: response.status, headers: response.headers, body: parsed };
}

/** A test server over `runtime` (a fresh one by default) with the operator key. */
export async function startTenantServer(
  options: Partial<RestServerOptions> = {},
): Promise<{ server: RestServer; runtime: JsRuntime; url: string; home: string }> {
  const home = seededHome('sandbox-tenants-');
  const runtime = options.runtime ?? testRuntime(home);
  const server = await startRestServer({ runtime, port: 0, apiKey: OPERATOR_KEY, ...options });
  return { server, runtime, url: server.url, home: runtime.homeDir };
}

/** Creates a managed key of `tenant` through the operator route; returns the key and its id. */
export async function createKey(
  url: string,
  tenant: string,
  extra: Record<string, unknown> = {},
): Promise<{ key: string; id: string }> {
  const answer = await api(url, 'POST', '/v1/keys', OPERATOR_KEY, { tenant, ...extra });
  if (answer.status !== 201) throw new Error(`key creation: ${answer.status} ${JSON.stringify(answer.body)}`);
  return { key: answer.body.key, id: answer.body.id };
}
