/**
 * Health endpoints for process supervisors and load balancers (Kubernetes liveness and readiness probes,
 * Compose health checks):
 *
 * - `GET /healthz` — liveness: 200 `{"status":"ok"}` while the process serves HTTP;
 * - `GET /readyz` — readiness: 200 `{"status":"ready"}` when the store answers a read (the signing keys,
 *   which every token request needs), else 503 `{"status":"unavailable"}`, so that a load balancer stops
 *   sending traffic to an instance whose database is gone. The store's error is not shown.
 *
 * Both answer `Cache-Control: no-store`.
 */
import type { FastifyInstance } from 'fastify';
import type { AuthStore } from './store/types.ts';

/** Registers `/healthz` and `/readyz` on `app`, reading `store` for readiness. */
export function registerHealthRoutes(app: FastifyInstance, store: AuthStore): void {
  app.get('/healthz', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    return { status: 'ok' };
  });
  app.get('/readyz', async (_request, reply) => {
    reply.header('cache-control', 'no-store');
    try {
      await store.listSigningKeys();
      return { status: 'ready' };
    } catch {
      return reply.code(503).send({ status: 'unavailable' });
    }
  });
}
