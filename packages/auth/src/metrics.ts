/**
 * `GET /metrics`: the service's metrics in the Prometheus text exposition format (version 0.0.4), by
 * prom-client, in a registry of this server's own (several servers in one process keep their counts
 * apart). Besides Node's process metrics (`auth_process_*`, `auth_nodejs_*`):
 *
 * - `auth_http_requests_total{route,method,status}` and `auth_http_request_duration_seconds{route,method}`:
 *   every answered request; `route` is the route's template (`/auth-admin/api/users/:id`), or `unmatched`,
 *   so that the label set stays bounded whatever paths clients send;
 * - `auth_token_requests_total{grant_type,outcome}`: token endpoint requests by grant type (the
 *   registered `grant_type` values, `other` for anything else) and outcome (`issued`, or the OAuth 2.0
 *   error code of RFC 6749 section 5.2 and its extensions);
 * - `auth_credential_validations_total{result}`: credential checks (login page, password grant) by result
 *   (`success`, `invalid_credentials`, `account_disabled`, `locked_out`);
 * - `auth_lockouts_total`: accounts locked by a failed validation (spec 001 "States and transitions");
 * - `auth_rate_limit_refusals_total{kind,scope}`: attempts refused by the brute-force limits (`kind`
 *   `password`, `totp`, `reset`; `scope` `ip` or `account`).
 *
 * Values and secrets of requests are never labels: only route templates, methods, statuses and codes.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import type { CredentialValidationEvent } from './credentials.ts';
import { GRANT_TYPES } from './store/types.ts';

/** Path of the metrics endpoint. */
export const METRICS_PATH = '/metrics';

/** Grant types counted by name (the store's {@link GRANT_TYPES}); any other `grant_type` value is counted as `other`. */
const KNOWN_GRANT_TYPES: ReadonlySet<string> = new Set(GRANT_TYPES);

/** Error codes counted by name (RFC 6749 section 5.2, RFC 8628 section 3.5, RFC 9449, RFC 8707). */
const KNOWN_ERRORS = new Set([
  'temporarily_unavailable',
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'invalid_target',
  'invalid_dpop_proof',
  'use_dpop_nonce',
  'authorization_pending',
  'slow_down',
  'access_denied',
  'expired_token',
  'server_error',
  'temporarily_unavailable',
]);

/** The metrics of one auth server. */
export class AuthMetrics {
  /** The registry `GET /metrics` renders. */
  readonly registry = new Registry();
  readonly #requests: Counter<'route' | 'method' | 'status'>;
  readonly #duration: Histogram<'route' | 'method'>;
  readonly #grants: Counter<'grant_type' | 'outcome'>;
  readonly #validations: Counter<'result'>;
  readonly #lockouts: Counter;
  readonly #refusals: Counter<'kind' | 'scope'>;

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'auth_' });
    this.#requests = new Counter({
      name: 'auth_http_requests_total',
      help: 'HTTP requests answered, by route template, method and status code',
      labelNames: ['route', 'method', 'status'] as const,
      registers,
    });
    this.#duration = new Histogram({
      name: 'auth_http_request_duration_seconds',
      help: 'Time from request to the end of the response, in seconds',
      labelNames: ['route', 'method'] as const,
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.#grants = new Counter({
      name: 'auth_token_requests_total',
      help: 'Token endpoint requests, by grant type and outcome (issued, or the OAuth error code)',
      labelNames: ['grant_type', 'outcome'] as const,
      registers,
    });
    this.#validations = new Counter({
      name: 'auth_credential_validations_total',
      help: 'Credential validations (login page, password grant), by result',
      labelNames: ['result'] as const,
      registers,
    });
    this.#lockouts = new Counter({
      name: 'auth_lockouts_total',
      help: 'Accounts locked out by a failed credential validation',
      registers,
    });
    this.#refusals = new Counter({
      name: 'auth_rate_limit_refusals_total',
      help: 'Attempts refused by the brute-force limits, by kind and by the counter (ip, account) that refused',
      labelNames: ['kind', 'scope'] as const,
      registers,
    });
  }

  /** Counts one refusal of the brute-force limits; pass it to `RateLimits.onRefused`. */
  readonly rateLimitRefused = (kind: string, scope: string): void => {
    this.#refusals.inc({ kind, scope });
  };

  /** Counts one credential validation; pass it as `CredentialValidatorOptions.onValidated`. */
  readonly credentialValidated = (event: CredentialValidationEvent): void => {
    this.#validations.inc({ result: event.result });
    if (event.lockedOut) this.#lockouts.inc();
  };

  /** Counts one token endpoint answer: `grantType` as sent, `status` and the JSON body of the answer. */
  tokenAnswered(grantType: unknown, status: number, body: unknown): void {
    const grant = typeof grantType === 'string' && KNOWN_GRANT_TYPES.has(grantType) ? grantType : 'other';
    let outcome = 'issued';
    if (status !== 200) {
      const error = errorCode(body);
      outcome = error !== undefined && KNOWN_ERRORS.has(error) ? error : 'other_error';
    }
    this.#grants.inc({ grant_type: grant, outcome });
  }

  /** Counts and times one answered request. */
  requestAnswered(route: string, method: string, status: number, seconds: number): void {
    this.#requests.inc({ route, method, status: String(status) });
    this.#duration.observe({ route, method }, seconds);
  }
}

function errorCode(body: unknown): string | undefined {
  if (typeof body !== 'string' || !body.startsWith('{')) return undefined;
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    return typeof parsed.error === 'string' ? parsed.error : undefined;
  } catch {
    return undefined;
  }
}

/** Options of {@link metricsPlugin}. */
export interface MetricsPluginOptions {
  readonly metrics: AuthMetrics;
  /** Path of the token endpoint (default `/connect/token`). */
  readonly tokenPath?: string;
}

/**
 * Fastify plugin: counts every answered request of the instance it is registered on (hooks are global:
 * it is wrapped with fastify-plugin) and serves `GET /metrics` (content type
 * `text/plain; version=0.0.4`).
 */
export const metricsPlugin = fp<MetricsPluginOptions>(
  async (app: FastifyInstance, { metrics, tokenPath = '/connect/token' }) => {
    app.addHook('onSend', async (request: FastifyRequest, reply: FastifyReply, payload) => {
      if (request.routeOptions.url === tokenPath && request.method === 'POST') {
        // The OAuth routes parse form bodies into URLSearchParams (oauth/form.ts).
        const grantType =
          request.body instanceof URLSearchParams ? request.body.get('grant_type') : undefined;
        metrics.tokenAnswered(grantType, reply.statusCode, payload);
      }
      return payload;
    });
    app.addHook('onResponse', async (request: FastifyRequest, reply: FastifyReply) => {
      metrics.requestAnswered(
        request.routeOptions.url ?? 'unmatched',
        request.method,
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
    });
    app.get(METRICS_PATH, async (_request, reply) => {
      reply.header('content-type', metrics.registry.contentType);
      reply.header('cache-control', 'no-store');
      return metrics.registry.metrics();
    });
  },
  { name: 'seed-auth-metrics' },
);
