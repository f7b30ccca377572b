/**
 * Rootless benchmark (issue 16): `JsRuntime` as root beside `JsRuntime` as the ordinary account
 * `sbxuser` (the rootless engine), in the same run, with a warm image (`busybox:latest`):
 *  - create → first exec: `create` + `exec('true')` until its exit code, per fresh box;
 *  - exec round trip: `exec('true')` → exit code in one running box;
 * each with network `disabled` and `enabled`. p50/p99 over N runs (default 20) and the rootless/root
 * ratio of the p50s (goal: within 1.25×), with the load average before and after. Samples are taken
 * in rounds of 5 per variant, alternating root and rootless, so that load from other processes on a
 * shared machine hits both alike. The rootless side is a worker process run as sbxuser
 * (`runuser -u sbxuser -- node bench/rootless.ts --worker`), driven over JSON lines.
 *
 * Usage (root, after `npm run test:setup`): `npm run bench:rootless -w @seed/sandbox` or
 * `node bench/rootless.ts [runs]`.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsImageRegistry } from '../src/types.ts';
import { percentile } from './raw.ts';

const IMAGE = 'busybox:latest';
const REGISTRIES: JsImageRegistry[] = [{ host: '127.0.0.1:5000', transport: 'http', search: true }];
const ROUND = 5;
const USER = 'sbxuser';
type Mode = 'enabled' | 'disabled';

/** Measures `count` create→first exec samples, or `count` exec round trips in one box, in ms. */
async function measure(
  runtime: JsRuntime,
  kind: 'create' | 'exec',
  mode: Mode,
  count: number,
): Promise<number[]> {
  const out: number[] = [];
  const execTrue = async (box: Awaited<ReturnType<JsRuntime['create']>>) => {
    const { exitCode } = await (await box.exec('true')).wait();
    if (exitCode !== 0) throw new Error(`exec true exited ${exitCode}`);
  };
  if (kind === 'create') {
    for (let i = 0; i < count; i++) {
      const t0 = performance.now();
      const box = await runtime.create({ image: IMAGE, network: { mode } });
      await execTrue(box);
      out.push(performance.now() - t0);
      await runtime.remove(box.id, true);
    }
    return out;
  }
  const box = await runtime.create({ image: IMAGE, network: { mode } });
  await execTrue(box);
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await execTrue(box);
    out.push(performance.now() - t0);
  }
  await runtime.remove(box.id, true);
  return out;
}

/** The sbxuser side: reads `{kind, mode, count}` lines, answers with `{samples}` lines. */
async function worker(): Promise<void> {
  const home = mkdtempSync('/tmp/sandbox-bench-rootless-');
  const runtime = new JsRuntime({ homeDir: home, imageRegistries: REGISTRIES });
  await runtime.images.pull(IMAGE);
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    const { kind, mode, count } = JSON.parse(line) as { kind: 'create' | 'exec'; mode: Mode; count: number };
    process.stdout.write(`${JSON.stringify({ samples: await measure(runtime, kind, mode, count) })}\n`);
  }
  rmSync(home, { recursive: true, force: true });
}

async function main(): Promise<void> {
  const runs = Number(process.argv[2] ?? 20);
  if (process.getuid?.() !== 0) throw new Error('run as root: the bench compares root and rootless boxes');
  const registry = spawnSync(
    process.execPath,
    [join(import.meta.dirname, '..', 'scripts', 'registry.ts'), '--quiet', '--images', 'busybox'],
    { stdio: 'inherit' },
  );
  if (registry.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
  const home = mkdtempSync('/tmp/sandbox-bench-root-');
  const root = new JsRuntime({ homeDir: home, imageRegistries: REGISTRIES });
  await root.images.pull(IMAGE);
  const child = spawn(
    'runuser',
    [
      '-u',
      USER,
      '--',
      'env',
      '-i',
      `HOME=/home/${USER}`,
      `PATH=${process.env.PATH}`,
      process.execPath,
      '--conditions=seed-source',
      import.meta.filename,
      '--worker',
    ],
    { stdio: ['pipe', 'pipe', 'inherit'], cwd: '/' },
  );
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => JSON.parse((await lines.next()).value as string);
  await next(); // ready
  const rootless = async (kind: 'create' | 'exec', mode: Mode, count: number): Promise<number[]> => {
    child.stdin.write(`${JSON.stringify({ kind, mode, count })}\n`);
    return (await next()).samples;
  };
  const loadBefore = loadavg();
  const samples: Record<string, number[]> = {};
  const add = (key: string, values: number[]) => {
    samples[key] = [...(samples[key] ?? []), ...values];
  };
  for (let done = 0; done < runs; done += ROUND) {
    const n = Math.min(ROUND, runs - done);
    for (const mode of ['disabled', 'enabled'] as const) {
      for (const kind of ['create', 'exec'] as const) {
        add(`root ${kind} ${mode}`, await measure(root, kind, mode, n));
        add(`rootless ${kind} ${mode}`, await rootless(kind, mode, n));
      }
    }
  }
  const loadAfter = loadavg();
  child.stdin.end();
  await new Promise((r) => child.on('exit', r));
  rmSync(home, { recursive: true, force: true });
  const fmt = (v: number) => v.toFixed(1).padStart(7);
  const cpu = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? '';
  console.log(
    `rootless bench: ${runs} runs per variant, ${cpu}, load ${loadBefore.map((l) => l.toFixed(2)).join(' ')} → ${loadAfter.map((l) => l.toFixed(2)).join(' ')}`,
  );
  console.log('variant                          p50 ms  p99 ms   rootless/root p50');
  for (const kind of ['create', 'exec'] as const) {
    for (const mode of ['disabled', 'enabled'] as const) {
      const r = samples[`root ${kind} ${mode}`]!;
      const u = samples[`rootless ${kind} ${mode}`]!;
      const label = kind === 'create' ? 'create→first exec' : 'exec round trip';
      console.log(
        `root     ${label.padEnd(18)} net ${mode.padEnd(8)}${fmt(percentile(r, 50))} ${fmt(percentile(r, 99))}`,
      );
      console.log(
        `rootless ${label.padEnd(18)} net ${mode.padEnd(8)}${fmt(percentile(u, 50))} ${fmt(percentile(u, 99))}   ${(percentile(u, 50) / percentile(r, 50)).toFixed(2)}×`,
      );
    }
  }
}

if (process.argv.includes('--worker')) await worker();
else await main();
