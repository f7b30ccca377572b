/**
 * Box benchmark (issue 8 "Bench"): with a warm image (`busybox:latest` from the local registry),
 *  - create → first exec result: `JsRuntime.create` + `exec('true')` until its exit code, per fresh box;
 *  - exec round trip: `exec('true')` → exit code in one running box;
 * p50/p99 over N runs (default 50), beside raw `crun` and `runc` doing the same work in the same run
 * (`bench/raw.ts`), with the ratios. Goal: create→exec p50 ≤ 100 ms and ≤ 1.5× raw; exec ≤ 1.5× raw.
 *
 * Usage (root): `npm run bench:boxes -w @seed/sandbox` or `node bench/boxes.ts [runs]`.
 * Needs the local registry (`npm run registry -w @seed/sandbox`; started here when missing).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { JsRuntime } from '../src/runtime/runtime.ts';
import { benchRaw, percentile, type RawBenchResult } from './raw.ts';

const runs = Number(process.argv[2] ?? 50);
const IMAGE = 'busybox:latest';

function ensureRegistry(): void {
  const script = join(import.meta.dirname, '..', 'scripts', 'registry.ts');
  const result = spawnSync(process.execPath, [script, '--quiet', '--images', 'busybox'], {
    stdio: 'inherit',
  });
  if (result.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
}

interface Row {
  name: string;
  createToFirstExecMs: number[];
  execRoundTripMs: number[];
}

async function benchRuntime(runtime: JsRuntime): Promise<Row & { stages: Record<string, number[]> }> {
  const createToFirstExecMs: number[] = [];
  const execRoundTripMs: number[] = [];
  const stages: Record<string, number[]> = {};
  // One warm-up box (page cache, engine helpers), not measured.
  const warm = await runtime.create({ image: IMAGE });
  await (await warm.exec('true')).wait();
  await runtime.remove(warm.id, true);
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const box = await runtime.create({ image: IMAGE });
    const { exitCode } = await (await box.exec('true')).wait();
    createToFirstExecMs.push(performance.now() - t0);
    if (exitCode !== 0) throw new Error(`exec true exited ${exitCode}`);
    const metrics = await box.metrics();
    for (const [key, value] of Object.entries(metrics)) {
      if (!key.endsWith('Ms') || typeof value !== 'number') continue;
      stages[key] ??= [];
      stages[key].push(value);
    }
    await runtime.remove(box.id, true);
  }
  const box = await runtime.create({ image: IMAGE });
  await (await box.exec('true')).wait();
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const { exitCode } = await (await box.exec('true')).wait();
    execRoundTripMs.push(performance.now() - t0);
    if (exitCode !== 0) throw new Error(`exec true exited ${exitCode}`);
  }
  await runtime.remove(box.id, true);
  return { name: 'JsRuntime (engine)', createToFirstExecMs, execRoundTripMs, stages };
}

function fmt(n: number): string {
  return n.toFixed(1).padStart(7);
}

async function main(): Promise<void> {
  ensureRegistry();
  const homeDir = mkdtempSync('/tmp/sandbox-bench-');
  try {
    const runtime = new JsRuntime({
      homeDir,
      imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
    });
    const image = await runtime.images.pull(IMAGE);
    const ours = await benchRuntime(runtime);
    const engineName = process.env.SEED_SANDBOX_RUNTIME === 'runc' ? 'runc' : 'crun';
    const raw: Record<string, RawBenchResult> = {};
    for (const rt of ['crun', 'runc'] as const) {
      raw[rt] = await benchRaw({ runtime: rt, layerDirs: image.layerDirs, runs });
    }
    const rows: Row[] = [ours, { name: 'raw crun', ...raw.crun! }, { name: 'raw runc', ...raw.runc! }];
    console.log(`\nbox benchmark: ${IMAGE}, ${runs} runs each, node ${process.version}`);
    console.log(`${'ms'.padEnd(22)} create→exec p50   p99   exec p50   p99`);
    for (const row of rows) {
      console.log(
        `${row.name.padEnd(22)} ${fmt(percentile(row.createToFirstExecMs, 50))} ${fmt(percentile(row.createToFirstExecMs, 99))}   ${fmt(percentile(row.execRoundTripMs, 50))} ${fmt(percentile(row.execRoundTripMs, 99))}`,
      );
    }
    const base = raw[engineName]!;
    const ratio = (a: number[], b: number[], p: number) => percentile(a, p) / percentile(b, p);
    console.log(`\nratios vs raw ${engineName} (the engine's runtime here):`);
    console.log(
      `  create→exec p50 ${ratio(ours.createToFirstExecMs, base.createToFirstExecMs, 50).toFixed(2)}×, p99 ${ratio(ours.createToFirstExecMs, base.createToFirstExecMs, 99).toFixed(2)}×`,
    );
    console.log(
      `  exec        p50 ${ratio(ours.execRoundTripMs, base.execRoundTripMs, 50).toFixed(2)}×, p99 ${ratio(ours.execRoundTripMs, base.execRoundTripMs, 99).toFixed(2)}×`,
    );
    const p50 = percentile(ours.createToFirstExecMs, 50);
    console.log(
      `goal create→exec p50 ≤ 100 ms: ${p50 <= 100 ? 'met' : 'NOT met'} (${p50.toFixed(1)} ms); ≤ 1.5× raw: ${ratio(ours.createToFirstExecMs, base.createToFirstExecMs, 50) <= 1.5 ? 'met' : 'NOT met'}; exec ≤ 1.5× raw: ${ratio(ours.execRoundTripMs, base.execRoundTripMs, 50) <= 1.5 ? 'met' : 'NOT met'}`,
    );
    console.log('\ncreate stage timings of the runtime (JsBoxMetrics), p50 ms:');
    for (const [key, values] of Object.entries(ours.stages))
      console.log(`  ${key.padEnd(24)} ${fmt(percentile(values, 50))}`);
  } finally {
    rmSync(homeDir, { recursive: true, force: true });
  }
}

await main();
