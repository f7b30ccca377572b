/**
 * Token grants per second on SQLite with 1 instance vs PostgreSQL with 1 instance vs PostgreSQL with 2
 * instances, in one run (issue 21; goals: PostgreSQL 1 instance ≥ 0.7× SQLite, 2 instances lose nothing
 * against 1 on this machine).
 *
 * Every instance is its own process (`../test/multi-instance-server.ts`, configured from the environment
 * as `auth-server` is); PostgreSQL is a throwaway cluster (`scripts/postgres.ts`), one database per
 * setup. autocannon, in this process, sends real HTTP/1.1 requests over loopback for a fixed time per
 * case; for 2 instances it runs one autocannon per instance at once, each with half the connections (the
 * clients alternate between instances, no proxy in between), and the rates are added.
 * - `client_credentials`: the same request repeated (HTTP Basic, `scope=api`);
 * - `refresh_token`: rotation chains — each request spends one refresh token and puts the answer's
 *   successor back into the pool (every request is a real rotation with reuse detection armed; in the
 *   2-instance case a chain moves between instances).
 * Cases are interleaved over BENCH_ROUNDS rounds; the median round is reported, with the CPU time per grant
 * of the auth server processes and of the PostgreSQL processes (from /proc), and the load average.
 *
 * Durability: SQLite runs as in production (WAL, `synchronous = NORMAL`: a commit is in the WAL file,
 * fsynced at checkpoints). PostgreSQL runs with `fsync = on` and `synchronous_commit = off` by default,
 * its nearest setting (WAL flushed by the WAL writer within 200 ms); `BENCH_PG_SYNC=on` makes every
 * commit wait for its WAL fsync.
 *
 * Run: `npm run bench:postgres -w @seed/auth`. Env: BENCH_SECONDS (per case and round, default 4),
 * BENCH_ROUNDS (default 3), BENCH_CONNECTIONS (default 16), BENCH_PG_SYNC (`off` default, or `on`).
 * Exits non-zero only on real errors (a non-2xx answer, a server that does not start).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { startPostgres } from '../../../scripts/postgres.ts';
import { type Instance, startInstance } from '../test/multi-instance-fixture.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const PG_SYNC = process.env.BENCH_PG_SYNC === 'on' ? 'on' : 'off';
const SECRET = 'bench-service-secret';
const ADMIN_PASSWORD = 'bench-admin-password';
const basicAuth = `Basic ${Buffer.from(`demo-service:${SECRET}`).toString('base64')}`;
const FORM = 'application/x-www-form-urlencoded';

/** CPU time (user + system) used so far by a process, µs, from `/proc/<pid>/stat` (0 when gone). */
function cpuMicros(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

/** CPU time of the postmaster and every process it started (backends, WAL writer…), µs. */
function postgresMicros(postmaster: number): number {
  let total = cpuMicros(postmaster);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1]!.split(' ');
      if (Number(stat[1]) === postmaster) total += (Number(stat[11]) + Number(stat[12])) * 10_000;
    } catch {
      // exited meanwhile
    }
  }
  return total;
}

/** One setup under test: its instances and (for PostgreSQL) the postmaster whose CPU counts too. */
interface Setup {
  readonly name: string;
  readonly instances: Instance[];
  readonly postmaster?: number;
  /** Unspent refresh tokens, per instance (a chain may move between instances in the 2-instance case). */
  readonly pool: string[];
}

async function seedRefreshTokens(base: string, count: number): Promise<string[]> {
  const tokens: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await fetch(`${base}/connect/token`, {
      method: 'POST',
      headers: { authorization: basicAuth, 'content-type': FORM },
      body: `grant_type=password&username=admin&password=${ADMIN_PASSWORD}&scope=offline_access%20api`,
    });
    const body = (await res.json()) as { refresh_token?: string };
    if (!body.refresh_token) throw new Error(`password grant failed: ${res.status} ${JSON.stringify(body)}`);
    tokens.push(body.refresh_token);
  }
  return tokens;
}

interface CaseResult {
  rps: number;
  total: number;
  serverCpuUs: number;
  dbCpuUs: number;
}

function cannon(
  base: string,
  connections: number,
  grant: string,
  pool: string[],
): Promise<autocannon.Result> {
  const url = `${base}/connect/token`;
  if (grant === 'client_credentials') {
    return autocannon({
      url,
      method: 'POST',
      connections,
      duration: SECONDS,
      headers: { authorization: basicAuth, 'content-type': FORM },
      body: 'grant_type=client_credentials&scope=api',
    });
  }
  return autocannon({
    url,
    connections,
    duration: SECONDS,
    requests: [
      {
        method: 'POST',
        headers: { authorization: basicAuth, 'content-type': FORM },
        setupRequest: (req) => {
          const token = pool.shift();
          if (token === undefined) throw new Error('refresh-token pool exhausted');
          return { ...req, body: `grant_type=refresh_token&refresh_token=${encodeURIComponent(token)}` };
        },
        onResponse: (status, body) => {
          if (status === 200) pool.push((JSON.parse(body) as { refresh_token: string }).refresh_token);
        },
      },
    ],
  });
}

async function runCase(setup: Setup, grant: string): Promise<CaseResult> {
  // Requests in flight when a case ends spend their token without returning the successor: top up.
  if (grant === 'refresh_token' && setup.pool.length < CONNECTIONS * 2) {
    setup.pool.push(
      ...(await seedRefreshTokens(setup.instances[0]!.base, CONNECTIONS * 2 - setup.pool.length)),
    );
  }
  const pids = setup.instances.map((i) => i.child.pid!);
  const serverBefore = pids.reduce((sum, pid) => sum + cpuMicros(pid), 0);
  const dbBefore = setup.postmaster ? postgresMicros(setup.postmaster) : 0;
  const per = Math.max(1, Math.floor(CONNECTIONS / setup.instances.length));
  const results = await Promise.all(setup.instances.map((i) => cannon(i.base, per, grant, setup.pool)));
  const serverCpuUs = pids.reduce((sum, pid) => sum + cpuMicros(pid), 0) - serverBefore;
  const dbCpuUs = setup.postmaster ? postgresMicros(setup.postmaster) - dbBefore : 0;
  let rps = 0;
  let total = 0;
  for (const r of results) {
    if (r.non2xx > 0 || r.errors > 0 || r.timeouts > 0)
      throw new Error(
        `${setup.name} ${grant}: ${r.non2xx} non-2xx, ${r.errors} errors, ${r.timeouts} timeouts`,
      );
    rps += r.requests.average;
    total += r.requests.total;
  }
  return { rps, total, serverCpuUs: serverCpuUs / total, dbCpuUs: dbCpuUs / total };
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;

const dir = mkdtempSync(join(tmpdir(), 'auth-pg-bench-'));
const cluster = await startPostgres({
  settings: { fsync: 'on', full_page_writes: 'on', synchronous_commit: PG_SYNC, max_connections: 100 },
});
const setups: Setup[] = [];
const started: Instance[] = [];
const instance = async (env: Record<string, string>): Promise<Instance> => {
  const one = await startInstance(env);
  started.push(one);
  return one;
};
try {
  const common = {
    AUTH_ADMIN_PASSWORD: ADMIN_PASSWORD,
    AUTH_DEMO_CLIENT_SECRET: SECRET,
    AUTH_ISSUER: 'http://bench.local',
  };
  const sqlite = await instance({ ...common, AUTH_DATABASE_PATH: join(dir, 'auth.sqlite') });
  const url1 = await cluster.createDatabase('one');
  const pg1 = await instance({ ...common, AUTH_DATABASE_URL: url1 });
  const url2 = await cluster.createDatabase('two');
  const pg2 = await Promise.all([
    instance({ ...common, AUTH_DATABASE_URL: url2 }),
    instance({ ...common, AUTH_DATABASE_URL: url2 }),
  ]);
  const poolSize = CONNECTIONS * 2;
  setups.push(
    { name: 'SQLite, 1 instance', instances: [sqlite], pool: await seedRefreshTokens(sqlite.base, poolSize) },
    {
      name: 'PostgreSQL, 1 instance',
      instances: [pg1],
      postmaster: cluster.pid,
      pool: await seedRefreshTokens(pg1.base, poolSize),
    },
    {
      name: 'PostgreSQL, 2 instances',
      instances: pg2,
      postmaster: cluster.pid,
      pool: await seedRefreshTokens(pg2[0]!.base, poolSize),
    },
  );
  const grants = ['client_credentials', 'refresh_token'];
  const results = new Map<string, CaseResult[]>();
  const loadBefore = loadavg();
  console.log(
    `auth grants/s: ${ROUNDS} rounds × ${SECONDS} s per case, ${CONNECTIONS} connections, PostgreSQL synchronous_commit=${PG_SYNC}, load average before ${loadBefore.map((x) => x.toFixed(2)).join(' ')}`,
  );
  for (let round = 0; round < ROUNDS; round++) {
    for (const grant of grants) {
      for (const setup of round % 2 ? [...setups].reverse() : setups) {
        const key = `${grant}|${setup.name}`;
        const result = await runCase(setup, grant);
        results.set(key, [...(results.get(key) ?? []), result]);
      }
    }
  }
  const loadAfter = loadavg();
  for (const grant of grants) {
    console.log(`\n${grant}`);
    const rates = new Map<string, number>();
    for (const setup of setups) {
      const rounds = results.get(`${grant}|${setup.name}`)!;
      const rps = median(rounds.map((r) => r.rps));
      rates.set(setup.name, rps);
      const server = median(rounds.map((r) => r.serverCpuUs));
      const db = median(rounds.map((r) => r.dbCpuUs));
      console.log(
        `  ${setup.name.padEnd(24)} ${rps.toFixed(0).padStart(6)} grants/s (rounds ${rounds.map((r) => r.rps.toFixed(0)).join(', ')}); CPU per grant: server ${server.toFixed(0)} µs${setup.postmaster ? `, PostgreSQL ${db.toFixed(0)} µs, total ${(server + db).toFixed(0)} µs` : ''}`,
      );
    }
    const sqliteRate = rates.get('SQLite, 1 instance')!;
    const one = rates.get('PostgreSQL, 1 instance')!;
    const two = rates.get('PostgreSQL, 2 instances')!;
    console.log(
      `  PostgreSQL 1 / SQLite: ${(one / sqliteRate).toFixed(2)}× (goal ≥ 0.7: ${one / sqliteRate >= 0.7 ? 'goal met' : 'goal NOT met'}); PostgreSQL 2 / 1 instance: ${(two / one).toFixed(2)}× (goal ≥ 1.0 within 5 % noise: ${two / one >= 0.95 ? 'goal met' : 'goal NOT met'})`,
    );
  }
  console.log(`\nload average after ${loadAfter.map((x) => x.toFixed(2)).join(' ')} (${cpus().length} CPUs)`);
} finally {
  await Promise.all(started.map((i) => i.stop()));
  await cluster.stop();
  rmSync(dir, { recursive: true, force: true });
}
