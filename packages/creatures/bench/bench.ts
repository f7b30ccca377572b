/**
 * Benchmark (`npm run bench -w @seed/creatures`): autocannon against four servers, in the same run, for
 * the two queries of the issue (Pikachu's full shape; every creature with a few fields):
 *
 * - `ours, caches off`: the creature server with `RESPONSE_CACHE_SIZE=0` — the engine itself (fast path,
 *   query plans, graphql-jit) answers every request;
 * - `ours, caches on`: the creature server with its response cache (default settings);
 * - `mercurius`: Fastify + Mercurius with graphql-jit (`jit: 1`) and its query cache, same schema and data
 *   (Mercurius has no response cache unless a plugin adds one);
 * - `precomputed`: a bare `node:http` server writing a precomputed answer (the upper bound of any server
 *   on this HTTP stack).
 *
 * Each server runs in its own process; one target is loaded at a time, in interleaved rounds (the order
 * rotates every round), and req/s is the total of requests over the total time per target. All four must
 * give the same answer first. Prints req/s per target and query, four ratios per query (caches off and on
 * vs Mercurius, caches on and off vs the precomputed bound) and the load average before and after.
 *
 * The load generator runs in this process, on the same cores as the servers, so req/s also depends on
 * how fast autocannon is and on what else the machine runs. The bench therefore also reads each server
 * process's own CPU time (user + system, all threads, from `/proc/<pid>/stat` on Linux) over its load
 * slices and prints the CPU microseconds each request cost it, with the same ratios: the server's own
 * cost per request, whatever the client and the neighbours do.
 *
 * Environment: `BENCH_DURATION` seconds per target per query (default 10), `BENCH_CONNECTIONS` (default
 * 100), `BENCH_PIPELINING` (requests in flight per connection, default 10: Fastify's benchmark settings),
 * `BENCH_WARMUP` seconds of warm-up per target per query (default 2), `BENCH_ROUND` seconds per round
 * (default 2).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';

const duration = Number(process.env.BENCH_DURATION ?? 10);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 100);
const pipelining = Number(process.env.BENCH_PIPELINING ?? 10);
const roundSeconds = Number(process.env.BENCH_ROUND ?? 2);

const QUERIES = {
  'creature(name:"Pikachu") full shape': `{ creature(name: "Pikachu") { id name classification types resistant weaknesses
    weight { minimum maximum } height { minimum maximum } fleeRate maxCP maxHP
    attacks { fast { name type damage } special { name type damage } }
    evolutions { id name } evolutionRequirements { amount name } previousEvolutions { id name } } }`,
  'creatures { id name weight { maximum } attacks { fast { name } } }':
    '{ creatures { id name weight { maximum } attacks { fast { name } } } }',
};

/** What each target caches, printed with the results. */
const CACHING = `What is cached:
- ours, caches off (RESPONSE_CACHE_SIZE=0): no response cache. Kept between requests: per query text, the
  parsed and validated document (LRU, 1000 texts) and per operation its compiled form (a query plan, else
  graphql-jit) and its cost estimate while the data is unchanged; per exact JSON body (LRU, 1000 bodies,
  found by a fingerprint of the bytes and one byte comparison) what the body asks for: its document,
  operation and variables, so a repeated body is not JSON-parsed again. Every request still reads the
  body, checks the cost, coerces variables (if the operation has any), runs the resolvers over the
  store's in-memory creatures and writes the answer.
- ours, caches on (RESPONSE_CACHE_SIZE=1000): the same, plus whole answers of read-only queries, keyed by
  Accept, Content-Type and the URL (GET) or the body bytes (POST), dropped on every data change.
- mercurius: Fastify + Mercurius 16 with jit: 1 (graphql-jit compiles a document on its first use, then
  runs the compiled query) and its own LRU of parsed and validated documents keyed by query text
  (default, on); Fastify JSON-parses every body; no response cache (Mercurius has none without a
  plugin), no request metrics (ours counts and times every request for /metrics).
- precomputed: a bare node:http server writing the answer bytes and headers prepared at start, found by
  body length and one byte comparison.`;

const TARGETS = ['ours, caches off', 'ours, caches on', 'mercurius', 'precomputed'] as const;
type Target = (typeof TARGETS)[number];

async function startChild(
  script: string,
  env: Record<string, string>,
  portOf: (line: string) => number | undefined,
) {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      out += chunk;
      for (const line of out.split('\n')) {
        const p = line.trim() ? portOf(line) : undefined;
        if (p) resolve(p);
      }
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code}`)));
  });
  return { child, url: `http://127.0.0.1:${port}/graphql`, pid: child.pid };
}

/** CPU seconds (user + system, all threads) a process has used so far; NaN where `/proc` is missing. */
function cpuSeconds(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of proc(5) (utime, stime), in clock ticks; `getconf CLK_TCK` is 100 on Linux.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

async function load(url: string, body: string, seconds: number) {
  const result = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections,
    pipelining,
    duration: seconds,
  });
  return { requests: result.requests.total, seconds: result.duration, errors: result.errors + result.non2xx };
}

async function stop(child: ChildProcess) {
  child.kill('SIGTERM');
  await once(child, 'exit');
}

const here = import.meta.dirname;
const ourServer = join(here, '..', 'bin', 'creature-server.ts');
const ourEnv = { PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: ':memory:', LOG_LEVEL: 'info' };
const ourPort = (line: string) =>
  line.includes('"listening"') ? (JSON.parse(line) as { port: number }).port : undefined;
const childPort = (line: string) =>
  line.startsWith('{"port"') ? (JSON.parse(line) as { port: number }).port : undefined;

const loadBefore = loadavg();
const off = await startChild(ourServer, { ...ourEnv, RESPONSE_CACHE_SIZE: '0' }, ourPort);
const on = await startChild(ourServer, { ...ourEnv, RESPONSE_CACHE_SIZE: '1000' }, ourPort);
const peer = await startChild(join(here, 'mercurius-server.ts'), {}, childPort);

// The precomputed answers are the creature server's own answers.
const answers: Record<string, string> = {};
for (const query of Object.values(QUERIES)) {
  const body = JSON.stringify({ query });
  const res = await fetch(off.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  answers[body] = await res.text();
}
const answersFile = join(tmpdir(), `creatures-bench-answers-${process.pid}.json`);
writeFileSync(answersFile, JSON.stringify(answers));
const bound = await startChild(
  join(here, 'precomputed-server.ts'),
  { BENCH_ANSWERS: answersFile },
  childPort,
);
const servers: Record<Target, { url: string; pid: number | undefined }> = {
  'ours, caches off': off,
  'ours, caches on': on,
  mercurius: peer,
  precomputed: bound,
};
const urls = Object.fromEntries(TARGETS.map((t) => [t, servers[t].url])) as Record<Target, string>;

const rows: { query: string; rate: Record<Target, number>; cpu: Record<Target, number> }[] = [];
try {
  for (const [name, query] of Object.entries(QUERIES)) {
    const body = JSON.stringify({ query });
    const texts = await Promise.all(
      TARGETS.map(async (t) => {
        const res = await fetch(urls[t], {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        return res.text();
      }),
    );
    for (let i = 1; i < texts.length; i++) {
      if (texts[i] !== texts[0])
        throw new Error(`${TARGETS[i]} answers ${name} differently from ${TARGETS[0]}`);
    }
    const totals = Object.fromEntries(TARGETS.map((t) => [t, { requests: 0, seconds: 0, cpu: 0 }])) as Record<
      Target,
      { requests: number; seconds: number; cpu: number }
    >;
    if (warmup > 0) for (const t of TARGETS) await load(urls[t], body, warmup);
    const rounds = Math.max(1, Math.round(duration / roundSeconds));
    for (let round = 0; round < rounds; round++) {
      // Rotate the order so that load from elsewhere on the machine hits every target alike.
      const order = TARGETS.map((_, i) => TARGETS[(i + round) % TARGETS.length]!);
      for (const t of order) {
        const cpuBefore = cpuSeconds(servers[t].pid);
        const r = await load(urls[t], body, duration / rounds);
        if (r.errors > 0) throw new Error(`${t} had ${r.errors} errors/non-2xx on ${name}`);
        totals[t].requests += r.requests;
        totals[t].seconds += r.seconds;
        totals[t].cpu += cpuSeconds(servers[t].pid) - cpuBefore;
      }
    }
    const rate = Object.fromEntries(
      TARGETS.map((t) => [t, totals[t].requests / totals[t].seconds]),
    ) as Record<Target, number>;
    const cpu = Object.fromEntries(
      TARGETS.map((t) => [t, (totals[t].cpu / totals[t].requests) * 1e6]),
    ) as Record<Target, number>;
    console.log(
      `${name}: ${TARGETS.map((t) => `${t} ${rate[t].toFixed(0)} req/s (${cpu[t].toFixed(1)} µs CPU/req)`).join(', ')}`,
    );
    rows.push({ query: name, rate, cpu });
  }
} finally {
  await Promise.all([off, on, peer, bound].map((s) => stop(s.child)));
}
const loadAfter = loadavg();

const f = (n: number) => n.toFixed(0);
const x = (n: number) => `${n.toFixed(2)}×`;
console.log(
  `\n${duration} s per target per query, ${connections} connections × ${pipelining} pipelined, Node ${process.version}, ` +
    `load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')} before, ${loadAfter.map((l) => l.toFixed(2)).join(' ')} after\n`,
);
console.log(CACHING);
console.log('\nThroughput (req/s; ratios of req/s):\n');
console.log(
  '| query | ours, caches off | ours, caches on | Mercurius+jit | precomputed | off / Mercurius | on / Mercurius | on / precomputed | off / precomputed |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const { query, rate: r } of rows) {
  console.log(
    `| \`${query}\` | ${f(r['ours, caches off'])} | ${f(r['ours, caches on'])} | ${f(r.mercurius)} | ${f(r.precomputed)} | ` +
      `${x(r['ours, caches off'] / r.mercurius)} | ${x(r['ours, caches on'] / r.mercurius)} | ` +
      `${x(r['ours, caches on'] / r.precomputed)} | ${x(r['ours, caches off'] / r.precomputed)} |`,
  );
}
console.log(
  "\nServer CPU per request (µs; ratios are speed-ups, the peer's cost over ours — higher is better for ours):\n",
);
console.log(
  '| query | ours, caches off | ours, caches on | Mercurius+jit | precomputed | off vs Mercurius | on vs Mercurius | on vs precomputed | off vs precomputed |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
const u = (n: number) => n.toFixed(1);
for (const { query, cpu: c } of rows) {
  console.log(
    `| \`${query}\` | ${u(c['ours, caches off'])} | ${u(c['ours, caches on'])} | ${u(c.mercurius)} | ${u(c.precomputed)} | ` +
      `${x(c.mercurius / c['ours, caches off'])} | ${x(c.mercurius / c['ours, caches on'])} | ` +
      `${x(c.precomputed / c['ours, caches on'])} | ${x(c.precomputed / c['ours, caches off'])} |`,
  );
}
console.log('\nGoals: off / Mercurius ≥ 1.50×, on / precomputed ≥ 0.80×.');
