/**
 * Box benchmark (issue 8 "Bench", issue 15 "Measured in bench/"): with a warm image (`busybox:latest`
 * from the local registry),
 *  - create → first exec result: `JsRuntime.create` + `exec('true')` until its exit code, per fresh box;
 *  - exec round trip: `exec('true')` → exit code (output drained) in one running box;
 * p50/p99 over N runs (default 50) of, in the same run:
 *  - the container tier as shipped (user namespace, idmapped layers), network enabled and disabled;
 *  - the container tier without a user namespace (an engine made with `SEED_SANDBOX_USERNS=0`), network
 *    enabled: the baseline of the user-namespace goal (within 10% of 51.9 ms / 9.5 ms);
 *  - the gVisor tier (`isolation: 'gvisor'`), network enabled and disabled (goal: create→exec ≤ 300 ms,
 *    exec ≤ 30 ms; ≤ 1.5× raw runsc);
 *  - raw `crun` with and without the user namespace, raw `runc`, raw `runsc` with `--network=host` and
 *    with `--network=none` (the tier's flag for a box without a network: the Sentry then runs in a
 *    network namespace and a `nobody` user namespace of runsc's own) (`bench/raw.ts`, `bench/gvisor.ts`:
 *    same layers, same config.json, same command `true` with piped stdio, waited for until exit and
 *    closed pipes);
 * with the ratios and the load average. Goal of issue 8: create→exec p50 ≤ 100 ms and ≤ 1.5× raw.
 *
 * Like for like: raw containers have a network namespace with only `lo` (network mode `disabled`), so the
 * runtime is measured with the default `network: enabled` (slirp4netns started at create) and with
 * `disabled`; create ratios against raw use the `disabled` row. Samples are interleaved (create: rounds of
 * 10 per variant; exec: one round trip per variant in turn; the variants in a random order each round) so that
 * load from other processes on this shared machine, and one variant's background teardowns, hit every variant alike.
 *
 * Usage (root): `npm run bench:boxes -w @seed/sandbox` or `node bench/boxes.ts [runs]`.
 * Needs the local registry (`npm run registry -w @seed/sandbox`; started here when missing).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { findExecutable } from '../src/engine/engine.ts';
import { chooseGVisorPlatform } from '../src/engine/gvisor-platform.ts';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBox } from '../src/runtime/box.ts';
import { RawRunsc } from './gvisor.ts';
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
  isolation: 'container' | 'gvisor' = 'container',
): Variant<JsBox> {
  return {
    row: { name, createToFirstExecMs: [], execRoundTripMs: [] },
    create: () => runtime.create({ image: IMAGE, network: { mode: network }, isolation }),
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

function rawVariant(raw: RawContainers, name = `raw ${raw.runtime}`): Variant<RawContainer> {
  return {
    row: { name, createToFirstExecMs: [], execRoundTripMs: [] },
    create: () => raw.create(),
    execTrue: (c) => raw.execTrue(c),
    remove: (c) => raw.remove(c),
  };
}

/** Shuffles `items` in place (Fisher-Yates). */
function shuffle(items: number[]): void {
  for (let j = items.length - 1; j > 0; j--) {
    const r = Math.floor(Math.random() * (j + 1));
    [items[j], items[r]] = [items[r] as number, items[j] as number];
  }
}

/**
 * Create → first exec in rounds of `ROUND` per variant (the variants in a random order each round), then
 * exec round trips one variant at a time.
 */
async function benchInterleaved(variants: Variant<unknown>[]): Promise<void> {
  // One warm-up box per variant (page cache, engine helpers), not measured.
  for (const v of variants) {
    const box = await v.create();
    await v.execTrue(box);
    await v.remove(box);
  }
  const order = variants.map((_, k) => k);
  for (let done = 0; done < runs; done += ROUND) {
    // A fresh random order of the variants each round: a variant measured right after another one's
    // teardowns (runsc delete takes 0.5-2 s in the background) would otherwise always pay for them.
    shuffle(order);
    for (const k of order) {
      const v = variants[k] as Variant<unknown>;
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
      // A fresh random order each round, so that no variant always follows the same one: in a fixed
      // rotation the two variants right after the gVisor ones measured 2.4–2.8× their peers' exec.
      shuffle(order);
      for (const k of order) {
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

/** A JsRuntime on its own home whose engine is made without user namespaces (the baseline). */
async function runtimeWithoutUserns(homeDir: string): Promise<JsRuntime> {
  const runtime = new JsRuntime({
    homeDir,
    imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
  });
  await runtime.images.pull(IMAGE);
  // The engine is made on the first box and reads SEED_SANDBOX_USERNS then (src/engine/engine.ts).
  const previous = process.env.SEED_SANDBOX_USERNS;
  process.env.SEED_SANDBOX_USERNS = '0';
  try {
    const box = await runtime.create({ image: IMAGE, network: { mode: 'disabled' } });
    await runtime.remove(box.id, true);
  } finally {
    if (previous === undefined) delete process.env.SEED_SANDBOX_USERNS;
    else process.env.SEED_SANDBOX_USERNS = previous;
  }
  return runtime;
}

async function main(): Promise<void> {
  ensureRegistry();
  const homeDir = mkdtempSync('/tmp/sandbox-bench-');
  const raws: RawContainers[] = [];
  try {
    const runtime = new JsRuntime({
      homeDir: join(homeDir, 'userns'),
      imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
    });
    await runtime.images.pull(IMAGE);
    const image = (await runtime.images.get(IMAGE))!;
    const plain = await runtimeWithoutUserns(join(homeDir, 'plain'));
    const stages: Record<string, number[]> = {};
    const enabled = runtimeVariant(runtime, 'container userns net on', 'enabled', stages);
    const disabled = runtimeVariant(runtime, 'container userns net off', 'disabled', null);
    const noUserns = runtimeVariant(plain, 'container no-userns on', 'enabled', null);
    const gvisor = runtimeVariant(runtime, 'gVisor tier net on', 'enabled', null, 'gvisor');
    const gvisorOff = runtimeVariant(runtime, 'gVisor tier net off', 'disabled', null, 'gvisor');
    const engineName = process.env.SEED_SANDBOX_RUNTIME === 'runc' ? 'runc' : 'crun';
    const raw: Record<string, Variant<RawContainer>> = {};
    for (const rt of ['crun', 'runc'] as const) {
      const containers = new RawContainers(rt, image.layerDirs);
      raws.push(containers);
      raw[rt] = rawVariant(containers);
    }
    const rawUserns = new RawContainers('crun', image.layerDirs, undefined, { userns: true });
    raws.push(rawUserns);
    const rawCrunUserns = rawVariant(rawUserns, 'raw crun userns');
    const runsc = findExecutable('runsc');
    if (!runsc) throw new Error('runsc is not installed (npm run test:setup -w @seed/sandbox)');
    const gvWork = join(homeDir, 'runsc');
    mkdirSync(gvWork, { recursive: true });
    const platform = await chooseGVisorPlatform(runsc, gvWork);
    const runscVariant = (network: 'host' | 'none', name: string): Variant<string> => {
      const raw = new RawRunsc(runsc, platform.platform, join(gvWork, network), image.layerDirs, network);
      return {
        row: { name, createToFirstExecMs: [], execRoundTripMs: [] },
        create: () => raw.create(),
        execTrue: (id) => raw.execTrue(id),
        remove: (id) => raw.remove(id),
      };
    };
    const rawRunsc = runscVariant('host', `raw runsc ${platform.platform}`);
    const rawRunscNone = runscVariant('none', `raw runsc ${platform.platform} net=none`);
    const variants = [
      enabled,
      disabled,
      noUserns,
      gvisor,
      gvisorOff,
      rawCrunUserns,
      raw.crun!,
      raw.runc!,
      rawRunsc,
      rawRunscNone,
    ] as Variant<unknown>[];
    const loadBefore = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    await benchInterleaved(variants);
    const rows = variants.map((v) => v.row);
    console.log(`\nbox benchmark: ${IMAGE}, ${runs} runs each, node ${process.version}, interleaved`);
    console.log(`${'ms'.padEnd(26)} create→exec p50   p99   exec p50   p99`);
    for (const row of rows) {
      console.log(
        `${row.name.padEnd(26)} ${fmt(percentile(row.createToFirstExecMs, 50))} ${fmt(percentile(row.createToFirstExecMs, 99))}   ${fmt(percentile(row.execRoundTripMs, 50))} ${fmt(percentile(row.execRoundTripMs, 99))}`,
      );
    }
    const base = raw[engineName]!.row;
    const ratio = (a: number[], b: number[], p: number) => percentile(a, p) / percentile(b, p);
    const both = (a: number[], b: number[]) =>
      `p50 ${ratio(a, b, 50).toFixed(2)}×, p99 ${ratio(a, b, 99).toFixed(2)}×`;
    const pair = (label: string, a: Row, b: Row) =>
      console.log(
        `  ${label.padEnd(44)} create→exec ${both(a.createToFirstExecMs, b.createToFirstExecMs)}; exec ${both(a.execRoundTripMs, b.execRoundTripMs)}`,
      );
    console.log('\nratios:');
    pair('container userns / no userns (net on)', enabled.row, noUserns.row);
    pair(`container userns net off / raw crun userns`, disabled.row, rawCrunUserns.row);
    pair(`container userns net off / raw ${engineName}`, disabled.row, base);
    pair(`container userns net on / raw ${engineName}`, enabled.row, base);
    pair('raw crun userns / raw crun', rawCrunUserns.row, raw.crun!.row);
    pair('gVisor tier net on / raw runsc', gvisor.row, rawRunsc.row);
    pair('gVisor tier net off / raw runsc', gvisorOff.row, rawRunsc.row);
    pair('gVisor tier net off / raw runsc net=none', gvisorOff.row, rawRunscNone.row);
    pair('gVisor tier net on / raw runsc net=none', gvisor.row, rawRunscNone.row);
    pair('raw runsc net=none / raw runsc', rawRunscNone.row, rawRunsc.row);
    pair('raw runsc / raw crun', rawRunsc.row, raw.crun!.row);
    const p50 = (r: Row, k: keyof Omit<Row, 'name'>) => percentile(r[k], 50);
    const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
    console.log(
      `goal user namespaces within 10% of 51.9 ms / 9.5 ms (net on): create→exec ${p50(enabled.row, 'createToFirstExecMs').toFixed(1)} ms ${verdict(p50(enabled.row, 'createToFirstExecMs') <= 51.9 * 1.1)}, exec ${p50(enabled.row, 'execRoundTripMs').toFixed(1)} ms ${verdict(p50(enabled.row, 'execRoundTripMs') <= 9.5 * 1.1)}; same run without: ${p50(noUserns.row, 'createToFirstExecMs').toFixed(1)} / ${p50(noUserns.row, 'execRoundTripMs').toFixed(1)} ms`,
    );
    console.log(
      `goal gVisor create→exec ≤ 300 ms: ${verdict(p50(gvisor.row, 'createToFirstExecMs') <= 300)}; exec ≤ 30 ms: ${verdict(p50(gvisor.row, 'execRoundTripMs') <= 30)}`,
    );
    const createRatio = ratio(disabled.row.createToFirstExecMs, base.createToFirstExecMs, 50);
    console.log(
      `goal create→exec p50 ≤ 100 ms (default network): ${verdict(p50(enabled.row, 'createToFirstExecMs') <= 100)}; ≤ 1.5× raw (net off): ${verdict(createRatio <= 1.5)}`,
    );
    console.log('\ncreate stage timings of the container tier, network enabled (JsBoxMetrics), p50 ms:');
    for (const [key, values] of Object.entries(stages))
      console.log(`  ${key.padEnd(24)} ${fmt(percentile(values, 50))}`);
    console.log(
      `load average: ${loadBefore} before, ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} after`,
    );
  } finally {
    for (const r of raws) await r.close();
    try {
      rmSync(homeDir, { recursive: true, force: true });
    } catch (error) {
      console.error(`leaving ${homeDir}: ${(error as Error).message}`);
    }
  }
}

await main();
