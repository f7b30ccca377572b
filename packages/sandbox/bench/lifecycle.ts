/**
 * Lifecycle benchmark (issue 18), with a warm image (`busybox:latest` from the local registry):
 *  - pause and resume p50/p99: `box.pause()` / `box.resume()` of a box running a busy loop and a sleep,
 *    beside the OCI runtime's own `crun pause` / `crun resume` of the same box in the same run (the peer);
 *    goal p50 ≤ 20 ms each;
 *  - create → first exec result p50/p99 from a warm pool (`runtime.pool`, the pool refilled between
 *    samples) beside a cold `create` (a box started for the call), interleaved, each sample started with
 *    the pool full and no refill running; goal warm p50 ≤ 10 ms.
 * The load average is printed before and after (the machine is shared).
 *
 * Usage (root): `npm run bench:lifecycle -w @seed/sandbox` or `node bench/lifecycle.ts [runs]`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { isHybridCgroupHost } from '../src/engine/engine.ts';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBox } from '../src/runtime/box.ts';
import { percentile } from './raw.ts';

const runs = Number(process.argv[2] ?? 50);
const IMAGE = 'busybox:latest';
const QUIET = { network: { mode: 'disabled' as const } };

function ensureRegistry(): void {
  const script = join(import.meta.dirname, '..', 'scripts', 'registry.ts');
  const result = spawnSync(process.execPath, [script, '--quiet', '--images', 'busybox'], {
    stdio: 'inherit',
  });
  if (result.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
}

async function execTrue(box: JsBox): Promise<void> {
  const execution = await box.exec('true');
  const { exitCode } = await execution.wait();
  if (exitCode !== 0) throw new Error(`true exited with ${exitCode}`);
}

const fmt = (samples: number[]) =>
  `${percentile(samples, 50).toFixed(2).padStart(8)} ${percentile(samples, 99).toFixed(2).padStart(8)}`;
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** `crun pause|resume <id>` as the engine runs crun (through its hybrid-host wrapper when needed). */
function crun(stateRoot: string, verb: 'pause' | 'resume', id: string): number {
  const args = ['--root', join(stateRoot, 'crun'), verb, id];
  const t0 = performance.now();
  const r = isHybridCgroupHost()
    ? spawnSync('unshare', ['-m', join(stateRoot, 'bin', 'crun-hybrid.sh'), ...args])
    : spawnSync('crun', args);
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`crun ${verb}: ${r.stderr}`);
  return ms;
}

async function main(): Promise<void> {
  ensureRegistry();
  const home = mkdtempSync('/tmp/sandbox-bench-lifecycle-');
  const runtime = new JsRuntime({
    homeDir: home,
    imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
  });
  const loadBefore = load();
  try {
    // Pause / resume, the runtime's and crun's, alternating on one busy box.
    const box = await runtime.create({ image: IMAGE, ...QUIET });
    await box.exec('sh', ['-c', 'while :; do :; done']);
    await box.exec('sleep', ['3600']);
    const pause: number[] = [];
    const resume: number[] = [];
    const crunPause: number[] = [];
    const crunResume: number[] = [];
    const stateRoot = join(home, 'engine');
    for (let i = 0; i < runs; i++) {
      let t0 = performance.now();
      await box.pause();
      pause.push(performance.now() - t0);
      t0 = performance.now();
      await box.resume();
      resume.push(performance.now() - t0);
      crunPause.push(crun(stateRoot, 'pause', box.id));
      crunResume.push(crun(stateRoot, 'resume', box.id));
    }
    await runtime.remove(box.id, true);

    // Warm pool vs cold create → first exec result, interleaved.
    const pool = runtime.pool({ image: IMAGE, size: 2, options: QUIET });
    await pool.filled();
    const warm: number[] = [];
    const cold: number[] = [];
    for (let i = 0; i < runs; i++) {
      await pool.filled();
      let t0 = performance.now();
      const w = await runtime.create({ image: IMAGE, ...QUIET });
      await execTrue(w);
      warm.push(performance.now() - t0);
      // The refill the hand-out started (after that first command) is done before the peer runs.
      await pool.filled();
      t0 = performance.now();
      const c = await runtime.create({ image: IMAGE, ...QUIET, memoryMib: 256 });
      await execTrue(c);
      cold.push(performance.now() - t0);
      await Promise.all([runtime.remove(w.id, true), runtime.remove(c.id, true)]);
    }
    await pool.close();

    console.log(`\nlifecycle benchmark: ${IMAGE}, ${runs} runs each, node ${process.version}`);
    console.log(`load average before: ${loadBefore}; after: ${load()}`);
    console.log(`${'ms'.padEnd(34)}      p50      p99`);
    console.log(`${'box.pause()'.padEnd(34)} ${fmt(pause)}`);
    console.log(`${'crun pause (peer)'.padEnd(34)} ${fmt(crunPause)}`);
    console.log(`${'box.resume()'.padEnd(34)} ${fmt(resume)}`);
    console.log(`${'crun resume (peer)'.padEnd(34)} ${fmt(crunResume)}`);
    console.log(`${'create→exec, warm pool'.padEnd(34)} ${fmt(warm)}`);
    console.log(`${'create→exec, cold (peer)'.padEnd(34)} ${fmt(cold)}`);
    const ratio = (a: number[], b: number[]) => (percentile(a, 50) / percentile(b, 50)).toFixed(2);
    console.log(
      `p50 ratios: pause ${ratio(pause, crunPause)}× crun, resume ${ratio(resume, crunResume)}× crun, warm ${ratio(warm, cold)}× cold`,
    );
  } finally {
    await runtime.shutdown(0).catch(() => {});
    for (const info of await runtime.listInfo()) await runtime.remove(info.id, true).catch(() => {});
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
