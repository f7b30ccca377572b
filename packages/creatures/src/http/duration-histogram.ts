/**
 * A Prometheus histogram of request durations per route, counted in plain arrays — one comparison loop,
 * one increment and one addition per request, no label object hashed — and handed to prom-client's
 * registry as a metric object (`name`, `help`, `type`, `get`, `reset`, the shape of prom-client's own
 * metrics) that the registry formats only when scraped: `_bucket` series with cumulative `le` buckets
 * (`+Inf` last), then `_sum` and `_count` per route, as prom-client's `Histogram` exposes them
 * (Prometheus exposition format 0.0.4, "Histograms and summaries").
 */

/** Upper bounds of the buckets, in seconds. */
export const DURATION_BUCKETS: readonly number[] = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
];

/** One series value in prom-client's metric object form. */
interface SeriesValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/** Counts kept per route label. */
interface RouteCounts {
  /** Requests per bucket (not cumulative); the last slot is `+Inf`. */
  buckets: Float64Array;
  /** Sum of the durations, in seconds. */
  sum: number;
  count: number;
}

/** The histogram `name` (with help text `help`) labelled by `route`. */
export class DurationHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  readonly #routes = new Map<string, RouteCounts>();
  /** The route last observed and its counts (consecutive requests mostly share a route). */
  #lastRoute = '';
  #last: RouteCounts | undefined;

  constructor(name: string, help: string) {
    this.name = name;
    this.help = help;
  }

  /** Counts one request of `route` that took `seconds` (≥ 0). */
  observe(route: string, seconds: number): void {
    let entry = route === this.#lastRoute ? this.#last : undefined;
    if (entry === undefined) {
      entry = this.#routes.get(route);
      if (entry === undefined) {
        entry = { buckets: new Float64Array(DURATION_BUCKETS.length + 1), sum: 0, count: 0 };
        this.#routes.set(route, entry);
      }
      this.#lastRoute = route;
      this.#last = entry;
    }
    let i = 0;
    while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]!) i++;
    entry.buckets[i]!++;
    entry.sum += seconds;
    entry.count++;
  }

  /** The series, as prom-client's `Registry.metrics()` reads them from a metric. */
  get(): { name: string; help: string; type: string; values: SeriesValue[]; aggregator: string } {
    const name = this.name;
    const values: SeriesValue[] = [];
    for (const [route, { buckets, sum, count }] of this.#routes) {
      let cumulative = 0;
      for (let i = 0; i <= DURATION_BUCKETS.length; i++) {
        cumulative += buckets[i]!;
        const le = i < DURATION_BUCKETS.length ? DURATION_BUCKETS[i]! : '+Inf';
        values.push({ labels: { le, route }, value: cumulative, metricName: `${name}_bucket` });
      }
      values.push({ labels: { route }, value: sum, metricName: `${name}_sum` });
      values.push({ labels: { route }, value: count, metricName: `${name}_count` });
    }
    return { name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** Forgets every count (`Registry.resetMetrics()`). */
  reset(): void {
    this.#routes.clear();
    this.#last = undefined;
  }
}
