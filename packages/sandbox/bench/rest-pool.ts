/**
 * Warm pools over REST (`npm run bench:rest-pool -w @seed/sandbox [-- runs]`): `create()` → first exec
 * result (`exec('true')` waited) of a busybox box on a REST runtime (`sandbox serve` in another process,
 * loopback), handed out by a warm pool the server keeps (`runtime.pool()`, size 2), against the same
 * `create()` starting a box (no pool: the peer), alternating one of each per round so that other load hits
 * both alike. Prints p50/p99 of each, the ratio of the p50s and the load average.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { JsRuntime } from '../src/js-runtime.ts';
import { percentile } from './raw.ts';
import { ensureRegistry, serve } from './rest-server.ts';

const runs = Number(process.argv[2] ?? 30);
const IMAGE = 'busybox:latest';
const pooled = { network: { mode: 'disabled' as const }, memoryMib: 128 };
const cold = { ...pooled, memoryMib: 192 };

/** create → first exec result, ms; the box is removed afterwards (not timed). */
async function createToExec(runtime: JsRuntime, options: typeof pooled): Promise<number> {
  const t0 = performance.now();
  const box = await runtime.create({ image: IMAGE, ...options });
  await (await box.exec('true')).wait();
  const ms = performance.now() - t0;
  await runtime.remove(box.id, true);
  return ms;
}

ensureRegistry();
const home = mkdtempSync('/tmp/sandbox-bench-rest-pool-');
const { url, child } = await serve(home);
const runtime = new JsRuntime({ url });
try {
  await createToExec(runtime, cold); // the image is pulled and unpacked once, before any timing
  const pool = runtime.pool({ image: IMAGE, size: 2, options: pooled });
  await pool.filled();
  const load = loadavg()[0]!;
  const samples = { pooled: [] as number[], cold: [] as number[] };
  for (let i = 0; i < runs; i++) {
    await pool.filled();
    samples.pooled.push(await createToExec(runtime, pooled));
    samples.cold.push(await createToExec(runtime, cold));
  }
  await pool.close();
  const line = (xs: number[]) =>
    `p50 ${percentile(xs, 50).toFixed(1).padStart(6)} ms  p99 ${percentile(xs, 99).toFixed(1).padStart(6)} ms`;
  console.log(
    `REST runtime (sandbox serve on loopback), busybox, ${runs} rounds: create → first exec result`,
  );
  console.log(`  warm pool (size 2)  ${line(samples.pooled)}`);
  console.log(`  no pool (peer)      ${line(samples.cold)}`);
  console.log(
    `  ratio pool / no pool at p50: ${(percentile(samples.pooled, 50) / percentile(samples.cold, 50)).toFixed(2)}; load average ${load.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}`,
  );
} finally {
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  rmSync(home, { recursive: true, force: true });
}
