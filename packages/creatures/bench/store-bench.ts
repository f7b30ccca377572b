/**
 * Store benchmark (`npm run bench:store -w @seed/creatures`): writes per second of two workloads —
 * `createMessage` (one statement on PostgreSQL) and `updateCreature` of each creature in turn (a
 * transaction of three statements) — in one run, against three set-ups of `creature-server` processes:
 *
 * - `sqlite, 1 instance`: the embedded store on a SQLite file (WAL, durable commits);
 * - `postgres, 1 instance`: the PostgreSQL store on a throwaway cluster (`scripts/postgres.ts`) with
 *   durable commits (`fsync`, `synchronous_commit`, `full_page_writes` on);
 * - `postgres, 2 instances`: two processes on one database, the load split evenly between them.
 *
 * Every instance has one GraphQL subscriber (graphql-sse, `messageChanged`); each mutation carries its
 * send time, so the subscribers measure how long a committed change takes to reach them (on the
 * instance that made it and on the other one). Prints, per set-up: writes/s, the delivery latency
 * p50/p99, CPU ms per write of the server processes and of PostgreSQL, whether every subscriber got
 * every write once, the ratios PostgreSQL 1 instance / SQLite and 2 instances / 1 instance, and the load
 * average before and after.
 *
 * Environment: `BENCH_DURATION` seconds per set-up (default 10), `BENCH_WARMUP` seconds (default 2),
 * `BENCH_CONNECTIONS` (default 16).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { createClient } from 'graphql-sse';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';

const duration = Number(process.env.BENCH_DURATION ?? 10);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const BIN = join(import.meta.dirname, '..', 'bin', 'creature-server.ts');
/** The two write workloads: what each mutation sends, and the subscription that sees it. */
const WORKLOADS = {
  createMessage: {
    mutation: 'mutation ($c: String) { createMessage(input: { content: $c }) { id } }',
    variables: (tag: string, _n: number): Record<string, unknown> => ({ c: tag }),
    subscription: 'subscription { messageChanged { message { content } } }',
    tagOf: (data: unknown) =>
      (data as { messageChanged: { message: { content: string } } }).messageChanged.message.content,
  },
  updateCreature: {
    mutation:
      'mutation ($id: ID!, $c: String) { updateCreature(id: $id, input: { classification: $c }) { id } }',
    variables: (tag: string, n: number): Record<string, unknown> => ({
      id: String(1 + (n % 151)).padStart(3, '0'),
      c: tag,
    }),
    subscription: 'subscription { creatureChanged { creature { classification } } }',
    tagOf: (data: unknown) =>
      (data as { creatureChanged: { creature: { classification: string } } }).creatureChanged.creature
        .classification,
  },
} as const;
type Workload = keyof typeof WORKLOADS;
let sent = 0;
const TICKS = 100; // clock ticks per second of /proc/<pid>/stat (USER_HZ on Linux)

interface Instance {
  url: string;
  child: ChildProcess;
}

async function startInstance(env: Record<string, string>): Promise<Instance> {
  const child = spawn(process.execPath, [BIN], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const match = /"msg":"listening"/.test(out) ? /"port":(\d+)/.exec(out) : null;
      if (match) resolve(Number(match[1]));
    });
    child.once('exit', (code) => reject(new Error(`creature-server exited with ${code}`)));
  });
  return { url: `http://127.0.0.1:${port}/graphql`, child };
}

async function stop(instance: Instance): Promise<void> {
  const exited = once(instance.child, 'exit');
  instance.child.kill('SIGTERM');
  await exited;
}

/** CPU seconds (user + system) of a process and, with `children`, of its direct children. */
function cpuSeconds(pid: number, children = false): number {
  const of = (p: number) => {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return (Number(fields[11]) + Number(fields[12])) / TICKS;
    } catch {
      return 0;
    }
  };
  let total = of(pid);
  if (children) {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const ppid = Number(readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
        if (ppid === pid) total += of(Number(entry));
      } catch {
        // The process ended while being read.
      }
    }
  }
  return total;
}

/**
 * A subscriber of the workload's changes, recording each change's tag (`<phase> <send time> <n>`, unique
 * per request) and the delay from its send time to its arrival.
 */
function subscriber(url: string, workload: Workload) {
  const client = createClient({ url, retryAttempts: 0 });
  const delays: number[] = [];
  const ids = new Set<string>();
  let duplicates = 0;
  const iterator = client.iterate<Record<string, unknown>>({ query: WORKLOADS[workload].subscription });
  const done = (async () => {
    for await (const result of iterator) {
      const tag = WORKLOADS[workload].tagOf(result.data!);
      if (ids.has(tag)) duplicates++;
      ids.add(tag);
      const sentAt = Number(tag.split(' ')[1]);
      if (tag.startsWith('measure ')) delays.push(performance.timeOrigin + performance.now() - sentAt);
    }
  })();
  return {
    delays,
    ids,
    get duplicates() {
      return duplicates;
    },
    async close() {
      await iterator.return?.();
      client.dispose();
      await done;
    },
  };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

/** Runs the mutation load against the instances (connections split evenly) for `seconds`. */
async function load(
  instances: Instance[],
  workload: Workload,
  seconds: number,
  phase: string,
): Promise<number> {
  const { mutation, variables } = WORKLOADS[workload];
  const results = await Promise.all(
    instances.map((instance) =>
      autocannon({
        url: instance.url,
        connections: Math.max(1, Math.round(connections / instances.length)),
        duration: seconds,
        requests: [
          {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            setupRequest: (request) => {
              const n = sent++;
              const tag = `${phase} ${Date.now()} ${n}`;
              return { ...request, body: JSON.stringify({ query: mutation, variables: variables(tag, n) }) };
            },
          },
        ],
      }),
    ),
  );
  for (const r of results)
    if (r.errors + r.non2xx > 0) throw new Error(`${r.errors + r.non2xx} failed requests`);
  return results.reduce((sum, r) => sum + r.requests.total, 0);
}

interface Row {
  workload: Workload;
  name: string;
  writesPerSecond: number;
  p50: number;
  p99: number;
  serverCpuMs: number;
  postgresCpuMs: number;
  complete: boolean;
}

async function measure(
  workload: Workload,
  name: string,
  instances: Instance[],
  cluster?: PostgresCluster,
): Promise<Row> {
  const subscribers = instances.map((i) => subscriber(i.url, workload));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const warm = await load(instances, workload, warmup, 'warmup');
  const cpu0 = instances.reduce((s, i) => s + cpuSeconds(i.child.pid!), 0);
  const pg0 = cluster ? cpuSeconds(cluster.pid, true) : 0;
  const started = performance.now();
  const writes = await load(instances, workload, duration, 'measure');
  const seconds = (performance.now() - started) / 1000;
  const cpu1 = instances.reduce((s, i) => s + cpuSeconds(i.child.pid!), 0);
  const pg1 = cluster ? cpuSeconds(cluster.pid, true) : 0;
  // Wait for the subscribers to drain, then check that each got every acknowledged write once (a write
  // in flight when autocannon stopped commits too, unacknowledged: every subscriber must have it).
  const total = warm + writes;
  const deadline = Date.now() + 30_000;
  while (subscribers.some((s) => s.ids.size < total) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  const first = subscribers[0]!.ids;
  const complete = subscribers.every(
    (s) =>
      s.ids.size >= total &&
      s.duplicates === 0 &&
      s.ids.size === first.size &&
      [...s.ids].every((id) => first.has(id)),
  );
  const delays = subscribers.flatMap((s) => s.delays);
  await Promise.all(subscribers.map((s) => s.close()));
  return {
    workload,
    name,
    writesPerSecond: writes / seconds,
    p50: percentile(delays, 50),
    p99: percentile(delays, 99),
    serverCpuMs: ((cpu1 - cpu0) * 1000) / writes,
    postgresCpuMs: ((pg1 - pg0) * 1000) / writes,
    complete,
  };
}

const loadBefore = loadavg();
const dir = mkdtempSync(join(tmpdir(), 'creatures-store-bench-'));
const cluster = await startPostgres({
  settings: { fsync: 'on', synchronous_commit: 'on', full_page_writes: 'on' },
});
const rows: Row[] = [];
try {
  for (const workload of Object.keys(WORKLOADS) as Workload[]) {
    const sqlite = await startInstance({ DATABASE_PATH: join(dir, `${workload}.db`) });
    rows.push(await measure(workload, 'sqlite, 1 instance', [sqlite]).finally(() => stop(sqlite)));
    const one = await startInstance({ DATABASE_URL: await cluster.createDatabase() });
    rows.push(await measure(workload, 'postgres, 1 instance', [one], cluster).finally(() => stop(one)));
    const url = await cluster.createDatabase();
    const pair = await Promise.all([
      startInstance({ DATABASE_URL: url }),
      startInstance({ DATABASE_URL: url }),
    ]);
    rows.push(
      await measure(workload, 'postgres, 2 instances', pair, cluster).finally(() =>
        Promise.all(pair.map(stop)),
      ),
    );
  }
} finally {
  await cluster.stop();
  rmSync(dir, { recursive: true, force: true });
}

const loadAfter = loadavg();
console.log(`${connections} connections, ${duration} s per set-up and workload`);
for (const r of rows) {
  console.log(
    `${r.workload.padEnd(15)} ${r.name.padEnd(22)} ${r.writesPerSecond.toFixed(0).padStart(6)} writes/s  delivery p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms  ` +
      `server CPU ${r.serverCpuMs.toFixed(2)} ms/write  PostgreSQL CPU ${r.postgresCpuMs.toFixed(2)} ms/write  ` +
      `every subscriber got every write once: ${r.complete ? 'yes' : 'NO'}`,
  );
}
for (const workload of Object.keys(WORKLOADS) as Workload[]) {
  const [sqliteRow, oneRow, twoRow] = rows.filter((r) => r.workload === workload) as [Row, Row, Row];
  console.log(
    `${workload}: postgres 1 instance / sqlite ${(oneRow.writesPerSecond / sqliteRow.writesPerSecond).toFixed(2)}x, ` +
      `2 instances / 1 instance ${(twoRow.writesPerSecond / oneRow.writesPerSecond).toFixed(2)}x`,
  );
}
console.log(
  `load average before ${loadBefore.map((l) => l.toFixed(2)).join(' ')}, after ${loadAfter.map((l) => l.toFixed(2)).join(' ')}`,
);
