/**
 * Test helpers shared by the engine test files: a box-spec factory over a busybox rootfs, and
 * collecting the stdout/stderr/exit code of an engine process or of `sh -c` run in a box.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { EngineBoxSpec, OciEngine } from '../../src/engine/index.ts';
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
