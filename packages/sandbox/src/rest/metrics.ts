/**
 * `GET /metrics` of the REST runtime server (`sandbox serve`): its metrics in the Prometheus text
 * exposition format (version 0.0.4), by prom-client, in a registry of the server's own (several servers
 * in one process keep their counts apart). Besides Node's process metrics (`sandbox_process_*`,
 * `sandbox_nodejs_*`):
 *
 * - `sandbox_http_requests_total{route,method,status}` and
 *   `sandbox_http_request_duration_seconds{route,method}`: every answered HTTP request; `route` is the
 *   route's template (`/v1/boxes/:box/executions`), or `unmatched`, so the label set stays bounded;
 * - `sandbox_boxes_running`: boxes running now (the runtime's `numRunningBoxes`);
 * - `sandbox_boxes_created_total`, `sandbox_boxes_failed_total`: boxes created, and boxes whose creation
 *   failed, by the runtime since it opened;
 * - `sandbox_commands_executed_total`, `sandbox_exec_errors_total`: commands the runtime started, and
 *   the ones that exited non-zero or failed to start, since it opened (REST and local callers alike);
 * - `sandbox_executions_started_total`, `sandbox_executions_finished_total{outcome}` (`exit_zero`,
 *   `exit_nonzero`, `failed`) and `sandbox_executions_running`: executions started over REST.
 *
 * Runtime figures are read from `JsRuntime.metrics()` at scrape time. No label carries a box id, a
 * command or a credential. The shared service adds its per-tenant gauges to the same registry
 * (`tenancy/metrics.ts`); since they name tenants, the endpoint is for operators (`sandbox.operator`).
 */
import type { FastifyInstance } from 'fastify';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { JsRuntime } from '../js-runtime.ts';
import { route } from './openapi.ts';
import type { ExecSession } from './sessions.ts';
import { Permission } from './wire.ts';

/** Path of the metrics endpoint. */
export const METRICS_PATH = '/metrics';

/** How an execution started over REST ended. */
export type ExecutionOutcome = 'exit_zero' | 'exit_nonzero' | 'failed';

/** The metrics of one REST runtime server. */
export class RestMetrics {
  /** The registry `GET /metrics` renders. */
  readonly registry = new Registry();
  readonly #runtime: JsRuntime;
  readonly #requests: Counter<'route' | 'method' | 'status'>;
  readonly #duration: Histogram<'route' | 'method'>;
  readonly #runtimeFigures: {
    running: Gauge;
    created: Counter;
    failed: Counter;
    commands: Counter;
    execErrors: Counter;
  };
  readonly #started: Counter;
  readonly #finished: Counter<'outcome'>;
  readonly #executing: Gauge;

  /** Creates the registry; `runtime` is the runtime the server exposes (read at scrape time). */
  constructor(runtime: JsRuntime) {
    this.#runtime = runtime;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'sandbox_' });
    this.#requests = new Counter({
      name: 'sandbox_http_requests_total',
      help: 'HTTP requests answered, by route template, method and status code',
      labelNames: ['route', 'method', 'status'] as const,
      registers,
    });
    this.#duration = new Histogram({
      name: 'sandbox_http_request_duration_seconds',
      help: 'Time from request to the end of the response, in seconds',
      labelNames: ['route', 'method'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.#runtimeFigures = {
      running: new Gauge({ name: 'sandbox_boxes_running', help: 'Boxes running now', registers }),
      created: new Counter({
        name: 'sandbox_boxes_created_total',
        help: 'Boxes created by the runtime since it opened',
        registers,
      }),
      failed: new Counter({
        name: 'sandbox_boxes_failed_total',
        help: 'Box creations that failed since the runtime opened',
        registers,
      }),
      commands: new Counter({
        name: 'sandbox_commands_executed_total',
        help: 'Commands the runtime started since it opened (REST and local callers)',
        registers,
      }),
      execErrors: new Counter({
        name: 'sandbox_exec_errors_total',
        help: 'Commands that exited non-zero or failed to start since the runtime opened',
        registers,
      }),
    };
    this.#started = new Counter({
      name: 'sandbox_executions_started_total',
      help: 'Executions started over REST',
      registers,
    });
    this.#finished = new Counter({
      name: 'sandbox_executions_finished_total',
      help: 'Executions started over REST that ended, by outcome (exit_zero, exit_nonzero, failed)',
      labelNames: ['outcome'] as const,
      registers,
    });
    this.#executing = new Gauge({
      name: 'sandbox_executions_running',
      help: 'Executions started over REST that are still running',
      registers,
    });
  }

  /** Counts and times one answered request (`route`: the route template or `unmatched`). */
  requestAnswered(route: string, method: string, status: number, seconds: number): void {
    this.#requests.inc({ route, method, status: String(status) });
    this.#duration.observe({ route, method }, seconds);
  }

  /** Counts an execution started over REST, and its outcome once it has ended. */
  executionStarted(session: ExecSession): void {
    this.#started.inc();
    this.#executing.inc();
    void session.done.then(() => {
      this.#executing.dec();
      const outcome: ExecutionOutcome =
        session.failure !== null ? 'failed' : session.exitCode === 0 ? 'exit_zero' : 'exit_nonzero';
      this.#finished.inc({ outcome });
    });
  }

  /**
   * The metrics text: reads the runtime's figures (`JsRuntime.metrics()`), then renders the registry.
   * Rejects with the runtime's error when its state cannot be read.
   */
  async render(): Promise<string> {
    const m = await this.#runtime.metrics();
    const f = this.#runtimeFigures;
    f.running.set(m.numRunningBoxes);
    for (const [counter, value] of [
      [f.created, m.boxesCreatedTotal],
      [f.failed, m.boxesFailedTotal],
      [f.commands, m.totalCommandsExecuted],
      [f.execErrors, m.totalExecErrors],
    ] as const) {
      counter.reset();
      counter.inc(value);
    }
    return this.registry.metrics();
  }
}

/**
 * Adds the metrics to a REST server's Fastify instance: an `onResponse` hook counting every answered
 * request, and `GET /metrics` as a plugin (permission `sandbox.operator`, since the figures name every
 * tenant; content type `text/plain; version=0.0.4`). Returns the metrics, for the server to report executions to.
 */
export function serveMetrics(app: FastifyInstance, runtime: JsRuntime): RestMetrics {
  const metrics = new RestMetrics(runtime);
  app.addHook('onResponse', async (request, reply) => {
    metrics.requestAnswered(
      request.routeOptions.url ?? 'unmatched',
      request.method,
      reply.statusCode,
      reply.elapsedTime / 1000,
    );
  });
  app.register(async (scope) => {
    scope.get(
      METRICS_PATH,
      route(Permission.operator, {
        tags: ['server'],
        summary: 'Prometheus metrics of the server (operators: the figures name every tenant)',
        description:
          'The text exposition format (version 0.0.4): requests by route and status, running boxes, boxes created and failed, commands, executions by outcome, process figures.',
        response: {
          200: {
            description: 'metrics text',
            content: { 'text/plain; version=0.0.4': { schema: { type: 'string' } } },
          },
        },
      }),
      async (_request, reply) => {
        const text = await metrics.render();
        reply.header('content-type', metrics.registry.contentType);
        return text;
      },
    );
  });
  return metrics;
}
