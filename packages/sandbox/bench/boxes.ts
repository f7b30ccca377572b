/**
 * Box benchmark (issue 8 "Bench"): with a warm image (`busybox:latest` from the local registry),
 *  - create → first exec result: `JsRuntime.create` + `exec('true')` until its exit code, per fresh box;
 *  - exec round trip: `exec('true')` → exit code (output drained) in one running box;
 * p50/p99 over N runs (default 50), beside raw `crun` and `runc` doing the same work in the same run
 * (`bench/raw.ts`: same layers, same config.json, same command `true` with piped stdio, waited for until
 * exit and closed pipes), with the ratios. Goal: create→exec p50 ≤ 100 ms and ≤ 1.5× raw; exec ≤ 1.5× raw.
 *
 * Like for like: raw containers have a network namespace with only `lo` (network mode `disabled`), so the
 * runtime is measured twice, with the default `network: enabled` (slirp4netns started at create) and with
 * `disabled`; create ratios use the `disabled` row. Samples are interleaved (create: rounds of 10 per
 * variant; exec: one round trip per variant in turn, in rotating order) so that load from other processes on this shared
 * machine hits every variant alike.
 *
 * Usage (root): `npm run bench:boxes -w @seed/sandbox` or `node bench/boxes.ts [runs]`.
 * Needs the local registry (`npm run registry -w @seed/sandbox`; started here when missing).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { JsBox } from '../src/runtime/box.ts';
import { JsRuntime } from '../src/runtime/runtime.ts';
import { percentile, type RawContainer, RawContainers } from './raw.ts';

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

/** One benchmarked variant: how it creates a box and runs one `true` in it. */
interface Variant<B> {
  row: Row;
  create(): Promise<B>;
  execTrue(box: B): Promise<void>;
  remove(box: B): Promise<void>;
}

const ROUND = 10;

function runtimeVariant(
  runtime: JsRuntime,
  name: string,
  network: 'enabled' | 'disabled',
  stages: Record<string, number[]> | null,
): Variant<JsBox> {
  return {
    row: { name, createToFirstExecMs: [], execRoundTripMs: [] },
    create: () => runtime.create({ image: IMAGE, network: { mode: network } }),
    async execTrue(box) {
      const { exitCode } = await (await box.exec('true')).wait();
      if (exitCode !== 0) throw new Error(`exec true exited ${exitCode}`);
    },
    async remove(box) {
      if (stages) {
        for (const [key, value] of Object.entries(await box.metrics())) {
          if (!key.endsWith('Ms') || typeof value !== 'number') continue;
          stages[key] ??= [];
          stages[key].push(value);
        }
      }
      await runtime.remove(box.id, true);
    },
  };
}

function rawVariant(raw: RawContainers): Variant<RawContainer> {
  return {
    row: { name: `raw ${raw.runtime}`, createToFirstExecMs: [], execRoundTripMs: [] },
    create: () => raw.create(),
    execTrue: (c) => raw.execTrue(c),
    remove: (c) => raw.remove(c),
  };
}

/** Create → first exec in rounds of `ROUND` per variant, then exec round trips one variant at a time. */
async function benchInterleaved(variants: Variant<unknown>[]): Promise<void> {
  // One warm-up box per variant (page cache, engine helpers), not measured.
  for (const v of variants) {
    const box = await v.create();
    await v.execTrue(box);
    await v.remove(box);
  }
  for (let done = 0; done < runs; done += ROUND) {
    for (const v of variants) {
      for (let i = 0; i < Math.min(ROUND, runs - done); i++) {
        const t0 = performance.now();
        const box = await v.create();
        await v.execTrue(box);
        v.row.createToFirstExecMs.push(performance.now() - t0);
        await v.remove(box);
      }
    }
  }
  const boxes: unknown[] = [];
  try {
    for (const v of variants) {
      const box = await v.create();
      boxes.push(box);
      await v.execTrue(box);
    }
    for (let i = 0; i < runs; i++) {
      // The order rotates so that no variant always follows the same one.
      for (let j = 0; j < variants.length; j++) {
        const k = (i + j) % variants.length;
        const v = variants[k] as Variant<unknown>;
        const t0 = performance.now();
        await v.execTrue(boxes[k]);
        v.row.execRoundTripMs.push(performance.now() - t0);
      }
    }
  } finally {
    for (const [k, box] of boxes.entries()) await variants[k]?.remove(box);
  }
}

function fmt(n: number): string {
  return n.toFixed(1).padStart(7);
}

async function main(): Promise<void> {
  ensureRegistry();
  const homeDir = mkdtempSync('/tmp/sandbox-bench-');
  const raws: RawContainers[] = [];
  try {
    const runtime = new JsRuntime({
      homeDir,
      imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
    });
    await runtime.images.pull(IMAGE);
    const image = (await runtime.images.get(IMAGE))!;
    const stages: Record<string, number[]> = {};
    const enabled = runtimeVariant(runtime, 'JsRuntime (net on)', 'enabled', stages);
    const disabled = runtimeVariant(runtime, 'JsRuntime (net off)', 'disabled', null);
    const engineName = process.env.SEED_SANDBOX_RUNTIME === 'runc' ? 'runc' : 'crun';
    const raw: Record<string, Variant<RawContainer>> = {};
    for (const rt of ['crun', 'runc'] as const) {
      const containers = new RawContainers(rt, image.layerDirs);
      raws.push(containers);
      raw[rt] = rawVariant(containers);
    }
    const variants = [enabled, disabled, raw.crun!, raw.runc!] as Variant<unknown>[];
    await benchInterleaved(variants);
    const rows = variants.map((v) => v.row);
    console.log(`\nbox benchmark: ${IMAGE}, ${runs} runs each, node ${process.version}, interleaved`);
    console.log(`${'ms'.padEnd(22)} create→exec p50   p99   exec p50   p99`);
    for (const row of rows) {
      console.log(
        `${row.name.padEnd(22)} ${fmt(percentile(row.createToFirstExecMs, 50))} ${fmt(percentile(row.createToFirstExecMs, 99))}   ${fmt(percentile(row.execRoundTripMs, 50))} ${fmt(percentile(row.execRoundTripMs, 99))}`,
      );
    }
    const base = raw[engineName]!.row;
    const ratio = (a: number[], b: number[], p: number) => percentile(a, p) / percentile(b, p);
    const both = (a: number[], b: number[]) =>
      `p50 ${ratio(a, b, 50).toFixed(2)}×, p99 ${ratio(a, b, 99).toFixed(2)}×`;
    console.log(`\nratios vs raw ${engineName} (the engine's runtime here; raw has network mode disabled):`);
    console.log(
      `  create→exec, net off (like for like) ${both(disabled.row.createToFirstExecMs, base.createToFirstExecMs)}`,
    );
    console.log(
      `  create→exec, net on  (default)       ${both(enabled.row.createToFirstExecMs, base.createToFirstExecMs)}`,
    );
    console.log(
      `  exec,        net on                  ${both(enabled.row.execRoundTripMs, base.execRoundTripMs)}`,
    );
    console.log(
      `  exec,        net off                 ${both(disabled.row.execRoundTripMs, base.execRoundTripMs)}`,
    );
    const p50 = percentile(enabled.row.createToFirstExecMs, 50);
    const createRatio = ratio(disabled.row.createToFirstExecMs, base.createToFirstExecMs, 50);
    const execRatio = ratio(enabled.row.execRoundTripMs, base.execRoundTripMs, 50);
    console.log(
      `goal create→exec p50 ≤ 100 ms (default network): ${p50 <= 100 ? 'met' : 'NOT met'} (${p50.toFixed(1)} ms); ≤ 1.5× raw (net off): ${createRatio <= 1.5 ? 'met' : 'NOT met'}; exec ≤ 1.5× raw: ${execRatio <= 1.5 ? 'met' : 'NOT met'}`,
    );
    console.log('\ncreate stage timings of the runtime, network enabled (JsBoxMetrics), p50 ms:');
    for (const [key, values] of Object.entries(stages))
      console.log(`  ${key.padEnd(24)} ${fmt(percentile(values, 50))}`);
    console.log(`load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  } finally {
    for (const r of raws) await r.close();
    rmSync(homeDir, { recursive: true, force: true });
  }
}

await main();
