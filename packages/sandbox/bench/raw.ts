/**
 * Raw OCI runtime baselines for the box benchmarks (issue 8 "Bench"): `crun`/`runc` driven directly,
 * doing the same work as an engine box — overlay root over the same layers, the same config.json
 * (namespaces, cgroup limits, capabilities, seccomp), `run --detach`, then `exec` — without the
 * engine's supervisor, validation, bookkeeping or stdio plumbing. `bench/boxes.ts` prints these
 * beside the runtime's own figures.
 *
 * With `userns` the raw containers run in a user namespace as the engine's boxes do: the same mapping
 * in config.json, the overlay root mounted by the engine's idmap helper over idmapped layer clones
 * (src/engine/idmap.ts), the writable layer owned by the mapped root.
 *
 * Run alone (`node bench/raw.ts [runs]`, root) it prints raw crun, raw runc and the engine
 * (`src/engine`) side by side, on a busybox rootfs.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findExecutable } from '../src/engine/engine.ts';
import {
  ensureSandboxIdRange,
  type IdMapping,
  type IdmapHelper,
  idmapHelperArgs,
  installIdmapHelper,
} from '../src/engine/idmap.ts';
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

/**
 * `exec <id> true` with piped stdio, resolved when it exited and both output pipes closed (as the box's
 * `wait()`, which resolves only once the output is drained). `true` is looked up on the container's PATH,
 * like the runtime's `exec('true')`.
 */
function execTrue(rt: string[], id: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(rt[0] as string, [...rt.slice(1), 'exec', id, 'true'], { stdio: 'pipe' });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`exec exited ${code}`))));
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
 * Raw containers of one OCI runtime, driven directly (root only): `create()` mounts the overlay over the
 * image layers and runs `run --detach` with the engine's config.json (network namespace with only `lo`,
 * i.e. network mode `disabled`); `execTrue(c)` is one `exec true` round trip; `close()` deletes every
 * container and mount it made. The benchmarks interleave these calls with the runtime's own.
 */
export class RawContainers {
  readonly runtime: 'crun' | 'runc';
  readonly #layerDirs: string[];
  readonly #work: string;
  readonly #ownWork: boolean;
  readonly #root: string;
  readonly #rt: { fast: string[]; full: string[] };
  readonly #live = new Set<RawContainer>();
  /** The user namespace of every container (mapping and idmap helper), when `userns` was asked for. */
  readonly #userns: { mapping: IdMapping; helper: IdmapHelper } | undefined;
  #seq = 0;

  /**
   * @param workDir scratch directory (default: a fresh one under the OS temp dir, removed by `close`).
   * @param options.userns run each container in a user namespace with the engine's mapping.
   * @throws Error when `userns` is asked for and perl is missing.
   */
  constructor(
    runtime: 'crun' | 'runc',
    layerDirs: string[],
    workDir?: string,
    options: { userns?: boolean } = {},
  ) {
    this.runtime = runtime;
    this.#layerDirs = layerDirs;
    this.#ownWork = workDir === undefined;
    this.#work = workDir ?? mkdtempSync(join(tmpdir(), `raw-${runtime}-`));
    this.#root = join(this.#work, 'state');
    mkdirSync(this.#root, { recursive: true });
    this.#rt = runtimeCommands(runtime, this.#root, this.#work);
    if (options.userns) {
      const perl = findExecutable('perl');
      if (!perl) throw new Error('perl is missing (perl-base)');
      // The mapped root looks up the root through the scratch directory: search permission only.
      chmodSync(this.#work, 0o711);
      this.#userns = { mapping: ensureSandboxIdRange(), helper: installIdmapHelper(this.#work, perl) };
    }
  }

  /** Mounts the overlay root and runs a fresh detached container. @throws Error when the runtime fails. */
  async create(): Promise<RawContainer> {
    const id = `raw-${process.pid}-${this.runtime}-${this.#seq++}`;
    const dir = join(this.#work, id);
    for (const d of ['upper', 'work', 'rootfs', 'bundle']) mkdirSync(join(dir, d), { recursive: true });
    const config = buildOciConfig(boxSpec(id, dir, this.#layerDirs), {
      rootfs: join(dir, 'rootfs'),
      init: '/usr/bin/catatonit',
      initArgs: ['-P'],
      cgroupsPath: `/seed-sandbox-raw/${id}`,
      ...(this.#userns ? { idMap: this.#userns.mapping } : {}),
    });
    writeFileSync(join(dir, 'bundle', 'config.json'), JSON.stringify(config));
    const lower = [...this.#layerDirs].reverse().join(':');
    if (this.#userns) {
      chmodSync(dir, 0o711);
      const { perl, script } = this.#userns.helper;
      await run(perl, [
        script,
        ...idmapHelperArgs(this.#userns.mapping),
        ...['own', `${dir}/upper`, 'own', `${dir}/work`],
        ...['overlay', lower, `${dir}/upper`, `${dir}/work`, `${dir}/rootfs`],
      ]);
    } else {
      await run('mount', [
        '-t',
        'overlay',
        'overlay',
        '-o',
        `lowerdir=${lower},upperdir=${dir}/upper,workdir=${dir}/work`,
        `${dir}/rootfs`,
      ]);
    }
    const c = { id, dir };
    this.#live.add(c);
    await run(this.#rt.full[0] as string, [
      ...this.#rt.full.slice(1),
      'run',
      '--detach',
      '--bundle',
      join(dir, 'bundle'),
      id,
    ]);
    return c;
  }

  /** One `exec true` round trip in `c` (spawn → exit and output pipes closed). */
  execTrue(c: RawContainer): Promise<void> {
    return execTrue(this.#rt.fast, c.id);
  }

  /** Deletes the container, unmounts its root and removes its files. */
  async remove(c: RawContainer): Promise<void> {
    this.#live.delete(c);
    await cleanup(this.#rt.full, c);
  }

  /** Removes every container still there and the scratch directory (when it made it). */
  async close(): Promise<void> {
    for (const c of [...this.#live]) await this.remove(c).catch(() => {});
    if (this.#ownWork) rmSync(this.#work, { recursive: true, force: true });
  }
}

/** One raw container: its id and directory. */
export interface RawContainer {
  id: string;
  dir: string;
}

/**
 * Measures raw `crun`/`runc`: create → first exec result over `runs` fresh containers (mount +
 * `run --detach` + `exec true`; the previous container is removed outside the measurement), then `runs`
 * exec round trips in one container. Root only; cleans up every container and mount it made.
 * @throws Error when the runtime fails (with its stderr).
 */
export async function benchRaw(options: RawBenchOptions): Promise<RawBenchResult> {
  const runs = options.runs ?? 50;
  const raw = new RawContainers(options.runtime, options.layerDirs, options.workDir);
  const result: RawBenchResult = { runtime: options.runtime, createToFirstExecMs: [], execRoundTripMs: [] };
  try {
    let last: RawContainer | undefined;
    for (let i = 0; i < runs; i++) {
      const t0 = performance.now();
      const c = await raw.create();
      await raw.execTrue(c);
      result.createToFirstExecMs.push(performance.now() - t0);
      if (last) await raw.remove(last);
      last = c;
    }
    if (last) {
      for (let i = 0; i < runs; i++) {
        const t0 = performance.now();
        await raw.execTrue(last);
        result.execRoundTripMs.push(performance.now() - t0);
      }
    }
  } finally {
    await raw.close();
  }
  return result;
}

async function cleanup(rt: string[], c: RawContainer): Promise<void> {
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
    const p = await engine.exec(id, { cmd: 'true', args: [], env: [] });
    const closed = Promise.all([once(p.stdout, 'end'), once(p.stderr, 'end')]);
    p.stdout.resume();
    p.stderr.resume();
    if ((await p.exited) !== 0) throw new Error('exec failed');
    await closed;
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
