/**
 * Test helpers shared by the engine test files: a test bed (temporary directory, busybox layer,
 * spec factory and an engine with its own state root, removed after the file's tests), a box-spec
 * factory over a busybox rootfs, and collecting the stdout/stderr/exit code of an engine process or
 * of `sh -c` run in a box.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
// internal: helpers of the engine-level tests
import {
  createEngine,
  type EngineBoxSpec,
  makeBusyboxRootfs,
  type OciEngine,
} from '../../src/engine/index.ts';
// internal: helpers of the engine-level tests
import type { EngineProcess } from '../../src/engine/types.ts';

/** What a finished process wrote and its exit code (128+signal when killed by a signal). */
export interface Collected {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Returns a factory of engine box specs: each call makes a fresh box directory
 * `<tmp>/boxes/<id>` and, unless `overrides.id` is given, a unique id `<prefix><pid>x<n>`.
 * The base spec is 1 cpu, 128 MiB, 64 pids, `PATH=/bin`, cwd `/root`, no mounts, no extra
 * capabilities, network `disabled`, detached; `defaults` then `overrides` are spread over it.
 */
export function specFactory(
  tmp: string,
  rootfs: string,
  prefix: string,
  defaults: Partial<EngineBoxSpec> = {},
): (overrides?: Partial<EngineBoxSpec>) => EngineBoxSpec {
  let seq = 0;
  return (overrides = {}) => {
    const id = overrides.id ?? `${prefix}${process.pid}x${++seq}`;
    const boxDir = join(tmp, 'boxes', id);
    mkdirSync(boxDir, { recursive: true });
    return {
      id,
      hostname: id,
      layerDirs: [rootfs],
      boxDir,
      env: ['PATH=/bin'],
      workingDir: '/root',
      cpus: 1,
      memoryMib: 128,
      pidsLimit: 64,
      mounts: [],
      capabilities: { add: [], drop: [] },
      network: { mode: 'disabled', allowNet: [] },
      detach: true,
      ...defaults,
      ...overrides,
    };
  };
}

/** What `engineTestBed` gives a test file. */
export interface EngineTestBed {
  /** The file's temporary directory: `layer0` (busybox), `boxes/<id>`, `state` (the engine's). */
  tmp: string;
  /** The busybox layer every spec uses. */
  rootfs: string;
  /** `specFactory(tmp, rootfs, idPrefix, defaults)`. */
  spec: (overrides?: Partial<EngineBoxSpec>) => EngineBoxSpec;
  /** The engine (state root `<tmp>/state`), made by the bed's `before` hook. */
  readonly engine: OciEngine;
}

/**
 * Sets up the test file's engine test bed: a temporary directory `<os tmpdir>/<tmpPrefix>XXXXXX` with
 * a busybox layer, a spec factory, and `node:test` hooks that make the engine before the file's tests
 * and afterwards remove every box it lists and the directory. Call at the top level of a test file.
 */
export function engineTestBed(
  tmpPrefix: string,
  idPrefix: string,
  defaults: Partial<EngineBoxSpec> = {},
): EngineTestBed {
  const tmp = mkdtempSync(join(tmpdir(), tmpPrefix));
  const rootfs = makeBusyboxRootfs(join(tmp, 'layer0'));
  let engine: OciEngine | undefined;
  before(async () => {
    engine = await createEngine({ stateRoot: join(tmp, 'state') });
  });
  after(async () => {
    if (engine)
      for (const b of await engine.list()) await engine.remove(b.id, b.boxDir ?? join(tmp, 'boxes', b.id));
    rmSync(tmp, { recursive: true, force: true });
  });
  return {
    tmp,
    rootfs,
    spec: specFactory(tmp, rootfs, idPrefix, defaults),
    get engine(): OciEngine {
      if (!engine) throw new Error('the engine is made by the test bed before hook');
      return engine;
    },
  };
}

/** Reads stdout and stderr of `p` to their end and waits for its exit code. */
export async function collect(p: EngineProcess): Promise<Collected> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const done = Promise.all([
    (async () => {
      for await (const c of p.stdout) out.push(c as Buffer);
    })(),
    (async () => {
      for await (const c of p.stderr) err.push(c as Buffer);
    })(),
  ]);
  const code = await p.exited;
  await done;
  return { code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() };
}

/** Runs `sh -c <script>` in box `id` (empty extra env unless `extra` says otherwise) and collects it. */
export async function execSh(
  engine: OciEngine,
  id: string,
  script: string,
  extra: Partial<Parameters<OciEngine['exec']>[1]> = {},
): Promise<Collected> {
  return collect(await engine.exec(id, { cmd: 'sh', args: ['-c', script], env: [], ...extra }));
}

/**
 * The pid of the parent-death watch (supervisor script) of the box in `boxDir`, from
 * `<boxDir>/bundle/supervisor.pid`, waiting up to `ms` ms for the watch to write it; 0 when it never does.
 */
export async function supervisorPid(boxDir: string, ms = 20_000): Promise<number> {
  const file = join(boxDir, 'bundle', 'supervisor.pid');
  for (let t = 0; ; t += 20) {
    let pid = 0;
    try {
      pid = Number(readFileSync(file, 'utf8'));
    } catch {} // not written yet, or gone with its box
    if (pid > 0) return pid;
    if (t >= ms) return 0;
    await sleep(20);
  }
}
