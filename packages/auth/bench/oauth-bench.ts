/**
 * Token-endpoint throughput: this package's server vs node-oidc-provider, same grants, same signing
 * algorithm, JWT access tokens on both, in one run (issue 5: goal ≥ 2×).
 *
 * Each server runs in its own child process (`oauth-servers.ts`); autocannon, in this process, sends real
 * HTTP/1.1 requests over loopback for a fixed time per case:
 * - `client_credentials`: the same request repeated (HTTP Basic client authentication, `scope=api`);
 * - `refresh_token`: rotation chains — each request spends one refresh token and the response's new one
 *   goes back into the pool (every request is a real rotation with reuse detection armed).
 * Every case must finish with zero non-2xx answers, else the run fails.
 *
 * Run: `npm run bench:oauth -w @seed/auth` (or `node packages/auth/bench/oauth-bench.ts`).
 * Env: BENCH_SECONDS (per case, default 5), BENCH_CONNECTIONS (default 16), BENCH_ALG (default ES256;
 * RS256, PS256, EdDSA also work).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const ALG = process.env.BENCH_ALG ?? 'ES256';
const POOL = CONNECTIONS * 2;

interface Started {
  readonly child: ChildProcess;
  readonly url: string;
  readonly tokenPath: string;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly refreshTokens: string[];
}

async function start(kind: 'seed' | 'oidc-provider'): Promise<Started> {
  const child = spawn(
    process.execPath,
    [new URL('./oauth-servers.ts', import.meta.url).pathname, kind, ALG, String(POOL)],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    if (line.startsWith('{')) return { child, ...(JSON.parse(line) as Omit<Started, 'child'>) };
  }
  throw new Error(`${kind}: server exited before it was ready`);
}

async function stop(started: Started): Promise<void> {
  const exited = new Promise((resolve) => started.child.once('exit', resolve));
  started.child.kill('SIGTERM');
  await exited;
}

interface CaseResult {
  readonly rps: number;
  readonly p99: number;
  readonly total: number;
}

function check(name: string, result: autocannon.Result): CaseResult {
  if (result.non2xx > 0 || result.errors > 0 || result.timeouts > 0) {
    throw new Error(
      `${name}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`,
    );
  }
  return { rps: result.requests.average, p99: result.latency.p99, total: result.requests.total };
}

async function clientCredentials(s: Started, name: string): Promise<CaseResult> {
  const result = await autocannon({
    url: `${s.url}${s.tokenPath}`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: SECONDS,
    headers: {
      authorization: `Basic ${Buffer.from(`${s.clientId}:${s.clientSecret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: 'grant_type=client_credentials&scope=api',
  });
  return check(name, result);
}

async function refresh(s: Started, name: string): Promise<CaseResult> {
  const pool = [...s.refreshTokens];
  const result = await autocannon({
    url: `${s.url}${s.tokenPath}`,
    connections: CONNECTIONS,
    duration: SECONDS,
    requests: [
      {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${s.clientId}:${s.clientSecret}`).toString('base64')}`,
          'content-type': 'application/x-www-form-urlencoded',
        },
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
  return check(name, result);
}

const fmt = (n: number) => n.toFixed(0).padStart(7);
const results: Record<string, Record<string, CaseResult>> = {};
for (const kind of ['seed', 'oidc-provider'] as const) {
  const server = await start(kind);
  try {
    results[kind] = {
      client_credentials: await clientCredentials(server, `${kind} client_credentials`),
      refresh_token: await refresh(server, `${kind} refresh_token`),
    };
  } finally {
    await stop(server);
  }
}

console.log(
  `\nToken endpoint, ${ALG} JWT access tokens, ${CONNECTIONS} connections, ${SECONDS} s per case, loopback HTTP/1.1`,
);
console.log('grant               server          req/s   p99 ms   requests');
let failed = false;
for (const grant of ['client_credentials', 'refresh_token'] as const) {
  for (const kind of ['seed', 'oidc-provider'] as const) {
    const r = results[kind]![grant]!;
    console.log(
      `${grant.padEnd(20)}${kind.padEnd(14)}${fmt(r.rps)}  ${String(r.p99).padStart(7)}  ${String(r.total).padStart(9)}`,
    );
  }
  const ratio = results.seed![grant]!.rps / results['oidc-provider']![grant]!.rps;
  console.log(
    `${grant.padEnd(20)}ratio seed / oidc-provider: ${ratio.toFixed(2)}x (goal >= 2x)${ratio >= 2 ? '' : '  BELOW GOAL'}`,
  );
  if (ratio < 2) failed = true;
}
process.exitCode = failed ? 1 : 0;
