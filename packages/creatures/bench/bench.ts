/**
 * Benchmark (`npm run bench -w @seed/creatures`): autocannon against the creature server and, in the
 * same run, against Mercurius + graphql-jit serving the same schema and data, for the two queries of
 * issue 2. Each server runs in its own process; one target is loaded at a time, in interleaved rounds of
 * about 2 s, and req/s is the total of requests over the total time per target.
 *
 * Environment: `BENCH_DURATION` seconds per target per query (default 10), `BENCH_CONNECTIONS`
 * (default 100), `BENCH_PIPELINING` (requests in flight per connection, default 10: the settings of
 * Fastify's own benchmarks), `BENCH_RESPONSE_CACHE` (our server's response cache size, default 1000;
 * 0 measures the engine without it), `BENCH_WARMUP` seconds of warm-up per target per query (default 2).
 * Prints requests/s (mean) per target and query, and the ratio creature server / Mercurius.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import autocannon from 'autocannon';

const duration = Number(process.env.BENCH_DURATION ?? 10);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 100);
const pipelining = Number(process.env.BENCH_PIPELINING ?? 10);
const responseCache = process.env.BENCH_RESPONSE_CACHE ?? '1000';

const QUERIES = {
  'creature(name:"Pikachu") full shape': `{ creature(name: "Pikachu") { id name classification types resistant weaknesses
    weight { minimum maximum } height { minimum maximum } fleeRate maxCP maxHP
    attacks { fast { name type damage } special { name type damage } }
    evolutions { id name } evolutionRequirements { amount name } previousEvolutions { id name } } }`,
  'creatures { id name weight { maximum } attacks { fast { name } } }':
    '{ creatures { id name weight { maximum } attacks { fast { name } } } }',
};

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

async function load(
  url: string,
  query: string,
  seconds: number,
): Promise<{ requests: number; seconds: number; errors: number }> {
  const result = await autocannon({
    url,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
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
const ours = await startChild(
  join(here, '..', 'bin', 'creature-server.ts'),
  {
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_PATH: ':memory:',
    LOG_LEVEL: 'info',
    RESPONSE_CACHE_SIZE: responseCache,
  },
  (line) => (line.includes('"listening"') ? (JSON.parse(line) as { port: number }).port : undefined),
);
const peer = await startChild(join(here, 'mercurius-server.ts'), {}, (line) =>
  line.startsWith('{"port"') ? (JSON.parse(line) as { port: number }).port : undefined,
);

const rows: { query: string; ours: number; mercurius: number; ratio: number }[] = [];
try {
  for (const [name, query] of Object.entries(QUERIES)) {
    // Same answer from both, or the comparison means nothing.
    const answers = await Promise.all(
      [ours.url, peer.url].map(async (url) => {
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ query }),
        });
        return res.text();
      }),
    );
    if (answers[0] !== answers[1]) throw new Error(`the two servers answer ${name} differently`);
    // Interleaved rounds (ours, peer, peer, ours, ...) so load from elsewhere on the machine hits both alike.
    const targets = { ours: ours.url, mercurius: peer.url };
    const totals = { ours: { requests: 0, seconds: 0 }, mercurius: { requests: 0, seconds: 0 } };
    if (warmup > 0) for (const url of Object.values(targets)) await load(url, query, warmup);
    const rounds = Math.max(1, Math.round(duration / 2));
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? (['ours', 'mercurius'] as const) : (['mercurius', 'ours'] as const);
      for (const target of order) {
        const r = await load(targets[target], query, duration / rounds);
        if (r.errors > 0) throw new Error(`${target} had ${r.errors} errors/non-2xx on ${name}`);
        totals[target].requests += r.requests;
        totals[target].seconds += r.seconds;
      }
    }
    const measured = {
      ours: totals.ours.requests / totals.ours.seconds,
      mercurius: totals.mercurius.requests / totals.mercurius.seconds,
    };
    console.log(
      `${name}: ours ${measured.ours.toFixed(0)} req/s, mercurius ${measured.mercurius.toFixed(0)} req/s`,
    );
    rows.push({
      query: name,
      ours: measured.ours,
      mercurius: measured.mercurius,
      ratio: measured.ours / measured.mercurius,
    });
  }
} finally {
  await stop(ours.child);
  await stop(peer.child);
}

console.log(
  `\n${duration} s per target per query, ${connections} connections × ${pipelining} pipelined, response cache ${responseCache}, Node ${process.version}\n`,
);
console.log('| query | creature server req/s | Mercurius+jit req/s | ratio |');
console.log('|---|---:|---:|---:|');
for (const r of rows) {
  console.log(
    `| \`${r.query}\` | ${r.ours.toFixed(0)} | ${r.mercurius.toFixed(0)} | ${r.ratio.toFixed(2)}× |`,
  );
}
