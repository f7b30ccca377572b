/**
 * Raw OCI runtime baselines for the box benchmarks (issue 8 "Bench"): `crun`/`runc` driven directly,
 * doing the same work as an engine box — overlay root over the same layers, the same config.json
 * (namespaces, cgroup limits, capabilities, seccomp), `run --detach`, then `exec` — without the
 * engine's supervisor, validation, bookkeeping or stdio plumbing. `bench/boxes.ts` prints these
 * beside the runtime's own figures.
 *
 * Run alone (`node bench/raw.ts [runs]`, root) it prints raw crun, raw runc and the engine
 * (`src/engine`) side by side, on a busybox rootfs.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createEngine,
  type EngineBoxSpec,
  isHybridCgroupHost,
  makeBusyboxRootfs,
} from '../src/engine/index.ts';
import { buildOciConfig } from '../src/engine/oci.ts';

/** Options of a raw run. */
export interface RawBenchOptions {
  runtime: 'crun' | 'runc';
  /** Image layers, bottom first (the same `layerDirs` the boxes use). */
  layerDirs: string[];
  /** Number of measured iterations (default 50). */
  runs?: number;
  /** Scratch directory (default: a fresh one under the OS temp dir, removed afterwards). */
  workDir?: string;
}

/** Latency samples of a raw run, ms, in run order. */
export interface RawBenchResult {
  runtime: 'crun' | 'runc';
  /** Mount overlay + `run --detach` + `exec true` until its exit, per fresh container. */
  createToFirstExecMs: number[];
  /** `exec true` round trips (spawn → exit) in one running container. */
  execRoundTripMs: number[];
}

/** The `p`-th percentile (0–100, nearest-rank) of `samples`, ms; NaN when empty. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Runs a command with stdio on /dev/null (a detached container init inherits it), resolved at exit. */
function run(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${file} ${args.join(' ')} exited ${code}`)),
    );
  });
}

/** `exec true` with piped stdio, resolved at exit. */
function execTrue(rt: string[], id: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(rt[0] as string, [...rt.slice(1), 'exec', id, '/bin/true'], { stdio: 'pipe' });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`exec exited ${code}`))));
  });
}

/** Runtime command lines: `full` for run/delete (crun needs a private mount ns on hybrid cgroup hosts). */
function runtimeCommands(
  runtime: 'crun' | 'runc',
  root: string,
  work: string,
): { fast: string[]; full: string[] } {
  const fast = [runtime, '--root', root];
  if (runtime !== 'crun' || !isHybridCgroupHost()) return { fast, full: fast };
  const wrapper = join(work, 'crun-hybrid.sh');
  writeFileSync(wrapper, '#!/bin/sh\numount /sys/fs/cgroup/unified 2>/dev/null\nexec crun "$@"\n', {
    mode: 0o755,
  });
  return { fast, full: ['unshare', '-m', wrapper, '--root', root] };
}

function boxSpec(id: string, boxDir: string, layerDirs: string[]): EngineBoxSpec {
  return {
    id,
    hostname: id,
    layerDirs,
    boxDir,
    env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
    workingDir: '/',
    cpus: 1,
    memoryMib: 512,
    pidsLimit: 1024,
    mounts: [],
    capabilities: { add: [], drop: [] },
    network: { mode: 'disabled', allowNet: [] },
    detach: true,
  };
}

/**
 * Measures raw `crun`/`runc`: create → first exec result over `runs` fresh containers, then `runs`
 * exec round trips in one container. Root only; cleans up every container and mount it made.
 * @throws Error when the runtime fails (with its stderr).
 */
export async function benchRaw(options: RawBenchOptions): Promise<RawBenchResult> {
  const runs = options.runs ?? 50;
  const work = options.workDir ?? mkdtempSync(join(tmpdir(), `raw-${options.runtime}-`));
  const root = join(work, 'state');
  mkdirSync(root, { recursive: true });
  const rt = runtimeCommands(options.runtime, root, work);
  const lower = [...options.layerDirs].reverse().join(':');
  const created: { id: string; dir: string }[] = [];
  const result: RawBenchResult = { runtime: options.runtime, createToFirstExecMs: [], execRoundTripMs: [] };
  try {
    for (let i = 0; i < runs; i++) {
      const id = `raw-${process.pid}-${options.runtime}-${i}`;
      const dir = join(work, id);
      for (const d of ['upper', 'work', 'rootfs', 'bundle']) mkdirSync(join(dir, d), { recursive: true });
      const config = buildOciConfig(boxSpec(id, dir, options.layerDirs), {
        rootfs: join(dir, 'rootfs'),
        init: '/usr/bin/catatonit',
        initArgs: ['-P'],
        cgroupsPath: `/seed-sandbox-raw/${id}`,
      });
      writeFileSync(join(dir, 'bundle', 'config.json'), JSON.stringify(config));
      const t0 = performance.now();
      await run('mount', [
        '-t',
        'overlay',
        'overlay',
        '-o',
        `lowerdir=${lower},upperdir=${dir}/upper,workdir=${dir}/work`,
        `${dir}/rootfs`,
      ]);
      created.push({ id, dir });
      await run(rt.full[0] as string, [
        ...rt.full.slice(1),
        'run',
        '--detach',
        '--bundle',
        join(dir, 'bundle'),
        id,
      ]);
      await execTrue(rt.fast, id);
      result.createToFirstExecMs.push(performance.now() - t0);
      if (i > 0) await cleanup(rt.full, created.shift() as { id: string; dir: string });
    }
    const last = created[0];
    if (last) {
      for (let i = 0; i < runs; i++) {
        const t0 = performance.now();
        await execTrue(rt.fast, last.id);
        result.execRoundTripMs.push(performance.now() - t0);
      }
    }
  } finally {
    for (const c of created) await cleanup(rt.full, c).catch(() => {});
    if (!options.workDir) rmSync(work, { recursive: true, force: true });
  }
  return result;
}

async function cleanup(rt: string[], c: { id: string; dir: string }): Promise<void> {
  await run(rt[0] as string, [...rt.slice(1), 'delete', '--force', c.id]).catch(() => {});
  await run('umount', [join(c.dir, 'rootfs')]).catch(() => {});
  rmSync(c.dir, { recursive: true, force: true });
}

/** Engine samples with the same shape as `benchRaw`, for the standalone report. */
export async function benchEngine(options: RawBenchOptions): Promise<RawBenchResult> {
  const runs = options.runs ?? 50;
  const work = options.workDir ?? mkdtempSync(join(tmpdir(), `eng-${options.runtime}-`));
  const engine = await createEngine({ stateRoot: join(work, 'state'), runtime: options.runtime });
  const result: RawBenchResult = { runtime: options.runtime, createToFirstExecMs: [], execRoundTripMs: [] };
  const boxes: EngineBoxSpec[] = [];
  const execTrueEngine = async (id: string) => {
    const p = await engine.exec(id, { cmd: '/bin/true', args: [], env: [] });
    p.stdout.resume();
    p.stderr.resume();
    if ((await p.exited) !== 0) throw new Error('exec failed');
  };
  try {
    for (let i = 0; i < runs; i++) {
      const s = boxSpec(
        `eng-${process.pid}-${options.runtime}-${i}`,
        join(work, `box${i}`),
        options.layerDirs,
      );
      s.detach = false;
      mkdirSync(s.boxDir, { recursive: true });
      const t0 = performance.now();
      await engine.start(s);
      boxes.push(s);
      await execTrueEngine(s.id);
      result.createToFirstExecMs.push(performance.now() - t0);
      if (i > 0) {
        const old = boxes.shift() as EngineBoxSpec;
        await engine.remove(old.id, old.boxDir);
      }
    }
    const last = boxes[0];
    if (last) {
      for (let i = 0; i < runs; i++) {
        const t0 = performance.now();
        await execTrueEngine(last.id);
        result.execRoundTripMs.push(performance.now() - t0);
      }
    }
  } finally {
    for (const b of boxes) await engine.remove(b.id, b.boxDir).catch(() => {});
    if (!options.workDir) rmSync(work, { recursive: true, force: true });
  }
  return result;
}

if (import.meta.main) {
  const runs = Number(process.argv[2] ?? 50);
  const work = mkdtempSync(join(tmpdir(), 'raw-bench-'));
  const layerDirs = [makeBusyboxRootfs(join(work, 'layer0'))];
  const fmt = (xs: number[]) =>
    `p50 ${percentile(xs, 50).toFixed(1).padStart(6)} ms  p99 ${percentile(xs, 99).toFixed(1).padStart(6)} ms`;
  console.log(`busybox rootfs, ${runs} runs each (create → first exec result; exec round trip)`);
  try {
    // Interleaved in rounds of 10 so that load from other processes hits both sides alike.
    for (const runtime of ['crun', 'runc'] as const) {
      const raw: RawBenchResult = { runtime, createToFirstExecMs: [], execRoundTripMs: [] };
      const eng: RawBenchResult = { runtime, createToFirstExecMs: [], execRoundTripMs: [] };
      for (let done = 0; done < runs; done += 10) {
        const n = Math.min(10, runs - done);
        for (const [into, fn] of [
          [raw, benchRaw],
          [eng, benchEngine],
        ] as const) {
          const r = await fn({ runtime, layerDirs, runs: n });
          into.createToFirstExecMs.push(...r.createToFirstExecMs);
          into.execRoundTripMs.push(...r.execRoundTripMs);
        }
      }
      console.log(
        `raw ${runtime}     create→exec ${fmt(raw.createToFirstExecMs)} | exec ${fmt(raw.execRoundTripMs)}`,
      );
      console.log(
        `engine ${runtime}  create→exec ${fmt(eng.createToFirstExecMs)} | exec ${fmt(eng.execRoundTripMs)}`,
      );
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
