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
 * Environment: `BENCH_DURATION` seconds per target per query (default 10), `BENCH_CONNECTIONS` (default
 * 100), `BENCH_PIPELINING` (requests in flight per connection, default 10: Fastify's benchmark settings),
 * `BENCH_WARMUP` seconds of warm-up per target per query (default 2), `BENCH_ROUND` seconds per round
 * (default 2).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
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
  return { child, url: `http://127.0.0.1:${port}/graphql` };
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
const urls: Record<Target, string> = {
  'ours, caches off': off.url,
  'ours, caches on': on.url,
  mercurius: peer.url,
  precomputed: bound.url,
};

const rows: { query: string; rate: Record<Target, number> }[] = [];
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
    const totals = Object.fromEntries(TARGETS.map((t) => [t, { requests: 0, seconds: 0 }])) as Record<
      Target,
      { requests: number; seconds: number }
    >;
    if (warmup > 0) for (const t of TARGETS) await load(urls[t], body, warmup);
    const rounds = Math.max(1, Math.round(duration / roundSeconds));
    for (let round = 0; round < rounds; round++) {
      // Rotate the order so that load from elsewhere on the machine hits every target alike.
      const order = TARGETS.map((_, i) => TARGETS[(i + round) % TARGETS.length]!);
      for (const t of order) {
        const r = await load(urls[t], body, duration / rounds);
        if (r.errors > 0) throw new Error(`${t} had ${r.errors} errors/non-2xx on ${name}`);
        totals[t].requests += r.requests;
        totals[t].seconds += r.seconds;
      }
    }
    const rate = Object.fromEntries(
      TARGETS.map((t) => [t, totals[t].requests / totals[t].seconds]),
    ) as Record<Target, number>;
    console.log(`${name}: ${TARGETS.map((t) => `${t} ${rate[t].toFixed(0)} req/s`).join(', ')}`);
    rows.push({ query: name, rate });
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
console.log('\nGoals: off / Mercurius ≥ 1.50×, on / precomputed ≥ 0.80×.');
