/**
 * REST runtime benchmark (issue 10 "Bench"): the exec round trip — `exec('true')` → exit code, and
 * `exec('echo', ['hi'])` → first stdout line → exit code — in one running busybox box, through the local
 * `JsRuntime` and through the REST `JsRuntime` talking to `sandbox serve` (a separate process, loopback),
 * in one run. Local and REST runs alternate so machine load hits both alike. Reports p50/p99 of each and
 * the added cost of REST (difference of the p50s, and the median of the paired differences), and the
 * round trip of one message on the multiplexed exec stream (a start the server refuses at once: the floor
 * of what REST adds per exec, two loopback hops and two process wake-ups).
 * Goal: ≤ 2 ms added per exec on loopback.
 *
 * Usage (root): `npm run bench:rest -w @seed/sandbox` or `node bench/rest.ts [runs]` (default 100).
 * Needs the local registry (`npm run registry -w @seed/sandbox`; started here when missing).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { WebSocket } from 'ws';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBox } from '../src/runtime/box.ts';
import { percentile } from './raw.ts';
import { ensureRegistry, serve } from './rest-server.ts';

const runs = Number(process.argv[2] ?? 100);
const IMAGE = 'busybox:latest';

async function execTrue(box: JsBox): Promise<number> {
  const t0 = performance.now();
  const { exitCode } = await (await box.exec('true')).wait();
  if (exitCode !== 0) throw new Error(`true exited ${exitCode}`);
  return performance.now() - t0;
}

async function execEcho(box: JsBox): Promise<number> {
  const t0 = performance.now();
  const execution = await box.exec('echo', ['hi']);
  const line = await (await execution.stdout()).next();
  const { exitCode } = await execution.wait();
  if (line !== 'hi' || exitCode !== 0) throw new Error(`echo gave ${line} / ${exitCode}`);
  return performance.now() - t0;
}

/** Round trips of a refused start (unknown field) on the multiplexed exec stream, ms. */
async function streamRoundTrips(url: string, count: number): Promise<number[]> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/executions/stream`, {
    perMessageDeflate: false,
  });
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const times: number[] = [];
  for (let stream = 1; stream <= count; stream++) {
    const t0 = performance.now();
    const reply = new Promise((resolve) => ws.once('message', resolve));
    ws.send(JSON.stringify({ type: 'start', stream, box: 'bench-rest', cmd: 'true', bench: true }));
    await reply;
    times.push(performance.now() - t0);
  }
  ws.close();
  return times;
}

function row(name: string, values: number[]): string {
  return `| ${name} | ${percentile(values, 50).toFixed(2)} | ${percentile(values, 99).toFixed(2)} |`;
}

async function main(): Promise<void> {
  ensureRegistry();
  const home = mkdtempSync('/tmp/sandbox-bench-rest-');
  const local = new JsRuntime({
    homeDir: home,
    imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
  });
  const { url, child } = await serve(home);
  try {
    const rest = new JsRuntime({ url });
    const created = await rest.create({ image: IMAGE }, 'bench-rest');
    const localBox = (await local.get('bench-rest'))!;
    const results: Record<string, { local: number[]; rest: number[] }> = {
      'exec true → exit code': { local: [], rest: [] },
      'exec echo → first line → exit code': { local: [], rest: [] },
    };
    const cases: [string, (box: JsBox) => Promise<number>][] = [
      ['exec true → exit code', execTrue],
      ['exec echo → first line → exit code', execEcho],
    ];
    // Warm-up (connections, JIT, page cache), not measured.
    for (let i = 0; i < 10; i++) {
      for (const [, fn] of cases) {
        await fn(localBox);
        await fn(created);
      }
    }
    for (let i = 0; i < runs; i++) {
      for (const [name, fn] of cases) {
        const order = i % 2 === 0 ? (['local', 'rest'] as const) : (['rest', 'local'] as const);
        for (const which of order)
          results[name]![which].push(await fn(which === 'local' ? localBox : created));
      }
    }
    console.log(`\nREST vs local exec round trip, ${runs} runs each, alternating (ms):\n`);
    console.log('| case | p50 | p99 |\n|---|---|---|');
    let worst = 0;
    for (const [name, { local: l, rest: r }] of Object.entries(results)) {
      console.log(row(`${name}, local`, l));
      console.log(row(`${name}, REST`, r));
      const added = percentile(r, 50) - percentile(l, 50);
      const paired = percentile(
        r.map((value, i) => value - l[i]!),
        50,
      );
      worst = Math.max(worst, added, paired);
      console.log(
        `| ${name}, added by REST | ${added.toFixed(2)} (p50 difference) | ${paired.toFixed(2)} (median paired) |`,
      );
    }
    const rtt = await streamRoundTrips(url, runs);
    console.log(
      `| exec stream message round trip (refused start) | ${percentile(rtt, 50).toFixed(2)} | ${percentile(rtt, 99).toFixed(2)} |`,
    );
    console.log(
      `\nGoal ≤ 2 ms added per exec on loopback: ${worst <= 2 ? 'met' : 'NOT met'} (worst ${worst.toFixed(2)} ms)`,
    );
    await rest.remove('bench-rest', true);
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    for (const info of await local.listInfo()) await local.remove(info.id, true).catch(() => {});
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
