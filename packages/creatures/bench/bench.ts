/**
 * Benchmark (`npm run bench -w @seed/creatures`): HTTP load against four servers, in the same run, for
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
 * Each server runs in its own process; one target is loaded at a time, in interleaved rounds: every round
 * loads each target once for `BENCH_ROUND` seconds, in an order that rotates every round, so that load
 * from elsewhere on the machine drifts over all four alike. All four must give the same answer first.
 * Each ratio is taken round by round (the two targets of a ratio ran seconds apart) and the median over
 * the rounds is printed with the lowest and highest round; req/s per target is the median over the
 * rounds. Prints four ratios per query (caches off and on vs Mercurius, caches on and off vs the
 * precomputed bound), whether the goals are met, and the load average before and after.
 *
 * The load comes from wrk (`npm run bench:setup` installs it; one thread, each connection sending
 * `BENCH_PIPELINING` requests at once by a Lua script) when it is on the PATH, else from autocannon in
 * this process (`BENCH_CLIENT=wrk|autocannon` chooses). wrk runs on core 0 and the servers on core 1
 * where `taskset` works (see `pin`); autocannon runs in this process, on any core: autocannon (a Node program parsing every answer in JavaScript) needs about as much CPU per
 * request as the fastest servers, so with it req/s of the fast targets is held back by the client and
 * their ratios shrink toward 1; wrk needs a fraction of that. req/s still depends on what else the
 * machine runs. The bench therefore also reads each server process's own CPU time (user + system, all
 * threads, from `/proc/<pid>/stat` on Linux) over its load slices and prints the CPU microseconds each
 * request cost it (all its CPU time over all its requests), with the same ratios round by round: the
 * server's own cost per request, whatever the client and the neighbours do.
 *
 * Environment: `BENCH_DURATION` seconds per target per query (default 10), `BENCH_CLIENT` (`wrk` or
 * `autocannon`; default wrk when installed), `BENCH_CONNECTIONS` (default 100), `BENCH_PIPELINING`
 * (requests in flight per connection, default 10: Fastify's benchmark settings),
 * `BENCH_WARMUP` seconds of warm-up per target per query (default 2), `BENCH_ROUND` seconds per target
 * per round (default 1; `BENCH_DURATION / BENCH_ROUND` rounds).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';

const duration = Number(process.env.BENCH_DURATION ?? 10);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 100);
const pipelining = Number(process.env.BENCH_PIPELINING ?? 10);
const roundSeconds = Number(process.env.BENCH_ROUND ?? 1);

/**
 * CPU placement: with `taskset` and two or more cores, every server (ours, Mercurius, the bound) runs on
 * core 1 and wrk on core 0, the same for every target, so that no target gains or loses from where the
 * scheduler happens to put it (`BENCH_PIN=0` turns this off). Unpinned, six fresh caches-off processes
 * measured 12.8–14.9 µs CPU per Pikachu request; pinned, five measured 13.9–14.2.
 */
const pin =
  process.env.BENCH_PIN !== '0' &&
  availableParallelism() >= 2 &&
  spawnSync('taskset', ['-c', '0', 'true']).status === 0;

/** `[command, args]` that runs `command args` on `core` when pinning is on, as is otherwise. */
function onCore(core: number, command: string, args: string[]): [string, string[]] {
  return pin ? ['taskset', ['-c', String(core), command, ...args]] : [command, args];
}

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
  body, checks the cost (a repeated body of an operation without variables keeps its check while the
  data is unchanged), coerces variables (if the operation has any), runs the resolvers over the
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
  const child = spawn(...onCore(1, process.execPath, [script]), {
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

/** One load slice's outcome: requests answered, seconds taken, errors and non-2xx answers. */
interface LoadResult {
  requests: number;
  seconds: number;
  errors: number;
}

async function loadWithAutocannon(url: string, body: string, seconds: number): Promise<LoadResult> {
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

/**
 * wrk's Lua script: every connection sends `WRK_PIPELINE` copies of the POST at once and sends them again
 * once all are answered (wrk's own pipelining example, with the body read from `WRK_BODY`).
 */
const WRK_SCRIPT = `local depth = tonumber(os.getenv("WRK_PIPELINE"))
local body = io.open(os.getenv("WRK_BODY")):read("*a")
local batch
init = function(args)
  wrk.method = "POST"
  wrk.body = body
  wrk.headers["Content-Type"] = "application/json"
  local r = {}
  for i = 1, depth do r[i] = wrk.format() end
  batch = table.concat(r)
end
request = function() return batch end
`;
const wrkScript = join(tmpdir(), `creatures-bench-wrk-${process.pid}.lua`);

async function loadWithWrk(url: string, body: string, seconds: number): Promise<LoadResult> {
  const bodyFile = `${wrkScript}.body`;
  writeFileSync(wrkScript, WRK_SCRIPT);
  writeFileSync(bodyFile, body);
  const child = spawn(
    ...onCore(0, 'wrk', [
      '-t1',
      `-c${connections}`,
      `-d${seconds}s`,
      '--timeout',
      '10s',
      '-s',
      wrkScript,
      url,
    ]),
    {
      env: { ...process.env, WRK_PIPELINE: String(pipelining), WRK_BODY: bodyFile },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const [code] = await once(child, 'exit');
  const done = /(\d+) requests in ([\d.]+)(m?s)/.exec(out);
  if (code !== 0 || !done) throw new Error(`wrk exited with ${code}: ${out}`);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const errors =
    (socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0) + Number(non2xx?.[1] ?? 0);
  return {
    requests: Number(done[1]),
    seconds: Number(done[2]) / (done[3] === 'ms' ? 1000 : 1),
    errors,
  };
}

/** Whether `wrk` runs here. */
function hasWrk(): boolean {
  try {
    return spawnSync('wrk', ['--version']).error === undefined;
  } catch {
    return false;
  }
}

const client = process.env.BENCH_CLIENT ?? (hasWrk() ? 'wrk' : 'autocannon');
if (client !== 'wrk' && client !== 'autocannon')
  throw new Error(`BENCH_CLIENT must be wrk or autocannon, got ${client}`);
const load = client === 'wrk' ? loadWithWrk : loadWithAutocannon;

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

/** The ratios printed, each as `[numerator, denominator]` targets. */
const RATIOS: readonly { label: string; of: Target; over: Target; goal: number }[] = [
  { label: 'off / Mercurius', of: 'ours, caches off', over: 'mercurius', goal: 1.5 },
  { label: 'on / Mercurius', of: 'ours, caches on', over: 'mercurius', goal: 0 },
  { label: 'on / precomputed', of: 'ours, caches on', over: 'precomputed', goal: 0.8 },
  { label: 'off / precomputed', of: 'ours, caches off', over: 'precomputed', goal: 0 },
];

/** One target's load slice of one round: requests, seconds, server CPU seconds. */
interface Slice {
  requests: number;
  seconds: number;
  cpu: number;
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** A ratio over the rounds: median, lowest and highest round. */
interface Spread {
  median: number;
  min: number;
  max: number;
}
const spreadOf = (values: readonly number[]): Spread => ({
  median: median(values),
  min: Math.min(...values),
  max: Math.max(...values),
});

const rows: {
  query: string;
  rate: Record<Target, number>;
  cpu: Record<Target, number>;
  rateRatios: Spread[];
  cpuRatios: Spread[];
  rounds: number;
}[] = [];
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
    if (warmup > 0) for (const t of TARGETS) await load(urls[t], body, warmup);
    const rounds = Math.max(1, Math.round(duration / roundSeconds));
    const slices: Record<Target, Slice>[] = [];
    for (let round = 0; round < rounds; round++) {
      // Rotate the order so that load from elsewhere on the machine hits every target alike.
      const order = TARGETS.map((_, i) => TARGETS[(i + round) % TARGETS.length]!);
      const slice = {} as Record<Target, Slice>;
      for (const t of order) {
        const cpuBefore = cpuSeconds(servers[t].pid);
        const r = await load(urls[t], body, duration / rounds);
        if (r.errors > 0) throw new Error(`${t} had ${r.errors} errors/non-2xx on ${name}`);
        slice[t] = { requests: r.requests, seconds: r.seconds, cpu: cpuSeconds(servers[t].pid) - cpuBefore };
      }
      slices.push(slice);
    }
    const rateOf = (s: Slice) => s.requests / s.seconds;
    const cpuOf = (s: Slice) => (s.cpu / s.requests) * 1e6;
    const rate = Object.fromEntries(
      TARGETS.map((t) => [t, median(slices.map((s) => rateOf(s[t])))]),
    ) as Record<Target, number>;
    const cpu = Object.fromEntries(
      TARGETS.map((t) => {
        const total = slices.reduce((sum, s) => sum + s[t].cpu, 0);
        return [t, (total / slices.reduce((sum, s) => sum + s[t].requests, 0)) * 1e6];
      }),
    ) as Record<Target, number>;
    // req/s ratios: ours over the other; CPU ratios: the other's cost over ours (both: higher is better).
    const rateRatios = RATIOS.map(({ of, over }) =>
      spreadOf(slices.map((s) => rateOf(s[of]) / rateOf(s[over]))),
    );
    const cpuRatios = RATIOS.map(({ of, over }) =>
      spreadOf(slices.map((s) => cpuOf(s[over]) / cpuOf(s[of]))),
    );
    console.log(
      `${name}: ${TARGETS.map((t) => `${t} ${rate[t].toFixed(0)} req/s (${cpu[t].toFixed(1)} µs CPU/req)`).join(', ')}`,
    );
    rows.push({ query: name, rate, cpu, rateRatios, cpuRatios, rounds });
  }
} finally {
  await Promise.all([off, on, peer, bound].map((s) => stop(s.child)));
}
const loadAfter = loadavg();
rmSync(wrkScript, { force: true });
rmSync(`${wrkScript}.body`, { force: true });
rmSync(answersFile, { force: true });

const f = (n: number) => n.toFixed(0);
const x = (n: number) => `${n.toFixed(2)}×`;
const spread = (r: Spread) => `${x(r.median)} (${r.min.toFixed(2)}–${r.max.toFixed(2)})`;
console.log(
  `\n${duration} s per target per query in ${rows[0]?.rounds ?? 0} rounds of ${roundSeconds} s, load from ${client} (${connections} connections × ${pipelining} pipelined), ${pin ? 'servers on core 1, client on core 0' : 'not pinned'}, Node ${process.version}, ` +
    `load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')} before, ${loadAfter.map((l) => l.toFixed(2)).join(' ')} after\n`,
);
console.log(CACHING);
console.log(
  '\nThroughput (req/s: median over the rounds; ratios: median over the rounds of the ratio within a round, lowest–highest round in brackets):\n',
);
console.log(
  `| query | ours, caches off | ours, caches on | Mercurius+jit | precomputed | ${RATIOS.map((r) => r.label).join(' | ')} |`,
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
for (const { query, rate: r, rateRatios } of rows) {
  console.log(
    `| \`${query}\` | ${f(r['ours, caches off'])} | ${f(r['ours, caches on'])} | ${f(r.mercurius)} | ${f(r.precomputed)} | ` +
      `${rateRatios.map(spread).join(' | ')} |`,
  );
}
console.log(
  "\nServer CPU per request (µs: all of a server's CPU time over all its requests; ratios are speed-ups, the peer's cost over ours within a round — higher is better for ours — median and lowest–highest round):\n",
);
console.log(
  `| query | ours, caches off | ours, caches on | Mercurius+jit | precomputed | ${RATIOS.map((r) => r.label.replace(' / ', ' vs ')).join(' | ')} |`,
);
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
const u = (n: number) => n.toFixed(1);
for (const { query, cpu: c, cpuRatios } of rows) {
  console.log(
    `| \`${query}\` | ${u(c['ours, caches off'])} | ${u(c['ours, caches on'])} | ${u(c.mercurius)} | ${u(c.precomputed)} | ` +
      `${cpuRatios.map(spread).join(' | ')} |`,
  );
}
console.log(
  '\nGoals (median req/s ratio): off / Mercurius ≥ 1.50×, on / precomputed ≥ 0.80×, on both queries.',
);
for (const { query, rateRatios } of rows) {
  const verdicts = RATIOS.flatMap((r, i) =>
    r.goal > 0
      ? [`${r.label} ${x(rateRatios[i]!.median)} ${rateRatios[i]!.median >= r.goal ? 'met' : 'NOT met'}`]
      : [],
  );
  console.log(`- \`${query}\`: ${verdicts.join(', ')}`);
}
