/**
 * The OCI runtime (crun or runc) of the container engine (engine.ts) and the subcommands its
 * lifecycle uses: `state`, `kill` (stopping a box), `delete`, `list`. Every call runs the runtime to completion
 * (host-process.ts `run`, 30 s at most); the caller reads the exit code. On a hybrid cgroup host crun's
 * calls that touch cgroups go through `unshare -m` and `crun-hybrid.sh` (scripts.ts).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { boxPids } from './cgroup-stats.ts';
import { alive, type RunResult, run, sleep, writeIfChanged } from './host-process.ts';
import { findExecutable, isHybridCgroupHost } from './host-system.ts';
import { CRUN_HYBRID_SH } from './scripts.ts';
import type { EngineState } from './types.ts';

/** OCI runtimes the engine can drive. */
export type OciRuntimeName = 'crun' | 'runc';

/**
 * The state an OCI runtime (crun, runc, runsc) prints for `state <id>` (runtime spec "State"):
 * `running`, `created` or `stopped` (anything else, or unreadable JSON, is `unknown`), with the host
 * pid of the container's init (runsc: its sandbox process) unless it is stopped.
 */
export function parseRuntimeState(stdout: string): EngineState {
  try {
    const s = JSON.parse(stdout) as { status: string; pid?: number };
    const status =
      s.status === 'running' || s.status === 'created' || s.status === 'stopped' ? s.status : 'unknown';
    return s.pid && status !== 'stopped' ? { status, pid: s.pid } : { status };
  } catch {
    return { status: 'unknown' };
  }
}

/** One OCI runtime with the engine's state directory (`<stateRoot>/<name>`). */
export class OciRuntime {
  /** `crun` or `runc`. */
  readonly name: OciRuntimeName;
  /** The runtime's state directory (`--root`). */
  readonly root: string;
  /** Command line before a subcommand, for exec/state/kill/list: `[bin, --root, root]`. */
  readonly fast: string[];
  /** Command line for subcommands that touch cgroups (`run`, `delete`); `fast` but on hybrid hosts. */
  readonly full: string[];

  /**
   * Chooses the runtime: `wanted`, else env `SEED_SANDBOX_RUNTIME`, else crun when installed, else
   * runc. `stateRoot` holds its state directory (created by the caller), `binDir` the helper script.
   * @throws BoxError naming `runtime` when the name is not crun or runc, the binary is missing, or
   *   crun on a hybrid cgroup host has no `unshare`.
   */
  constructor(wanted: string | undefined, stateRoot: string, binDir: string) {
    const chosen = wanted ?? process.env.SEED_SANDBOX_RUNTIME;
    if (chosen !== undefined && chosen !== 'crun' && chosen !== 'runc') {
      throw new BoxError(`runtime: '${chosen}' must be 'crun' or 'runc'`, {
        field: 'runtime',
        code: 'invalid_option',
      });
    }
    const name: OciRuntimeName = chosen ?? (findExecutable('crun') ? 'crun' : 'runc');
    const bin = findExecutable(name);
    if (!bin)
      throw new BoxError(`runtime: '${name}' is not installed (apt-get install ${name})`, {
        code: 'unsupported',
      });
    this.name = name;
    this.root = join(stateRoot, name);
    this.fast = [bin, '--root', this.root];
    if (name === 'crun' && isHybridCgroupHost()) {
      const hybrid = join(binDir, 'crun-hybrid.sh');
      writeIfChanged(hybrid, CRUN_HYBRID_SH);
      const unshare = findExecutable('unshare');
      if (!unshare)
        throw new BoxError('runtime: crun on a hybrid cgroup host needs unshare (util-linux)', {
          code: 'unsupported',
        });
      this.full = [unshare, '-m', hybrid, '--root', this.root];
    } else {
      this.full = this.fast;
    }
  }

  /** Runs `<runtime> <args…>` (through `full` when `full` is true). */
  call(args: string[], full = false): Promise<RunResult> {
    const cmd = full ? this.full : this.fast;
    return run(cmd[0] as string, [...cmd.slice(1), ...args]);
  }

  /** True while the runtime keeps a state directory for container `id` (from run to delete). */
  known(id: string): boolean {
    return existsSync(join(this.root, id));
  }

  /**
   * `<runtime> state <id>`: undefined when the runtime does not know the container, `unknown` when its
   * answer is unreadable; `pid` the host pid of the container init, left out once it is stopped.
   */
  async state(id: string): Promise<EngineState | undefined> {
    const r = await this.call(['state', id]);
    return r.code === 0 ? parseRuntimeState(r.stdout) : undefined;
  }

  /**
   * Stops container `id` whose init is host pid `init`: SIGTERM to its other processes (`kill --all`)
   * and up to `graceMs` ms for them to exit, then SIGKILL to the init, which makes the kernel kill
   * everything left in the box's pid namespace; waits up to 5 s for the init to be gone.
   */
  async stopContainer(id: string, init: number, graceMs: number): Promise<void> {
    const others = (): number[] => boxPids(init).filter((p) => p !== init && alive(p));
    if (graceMs > 0 && others().length > 0) {
      await this.call(['kill', '--all', id, 'TERM']);
      const deadline = performance.now() + graceMs;
      while (others().length > 0 && performance.now() < deadline) await sleep(10);
    }
    if (alive(init)) await this.call(['kill', id, 'KILL']);
    for (let i = 0; i < 500 && alive(init); i++) await sleep(10);
  }

  /**
   * `<runtime> delete --force <id>`.
   * @throws BoxError when the runtime fails for another reason than not knowing the container.
   */
  async delete(id: string): Promise<void> {
    const del = await this.call(['delete', '--force', id], true);
    if (del.code !== 0 && !/does not exist|not exist|No such file/i.test(del.stderr)) {
      throw new BoxError(`box ${id}: deleting the container failed: ${del.stderr.trim()}`, {
        code: 'internal',
      });
    }
  }

  /**
   * Ids of the containers the runtime has state for (`<runtime> list`); empty when it fails.
   * @throws SyntaxError when the runtime's output is not JSON.
   */
  async list(): Promise<string[]> {
    const r = await this.call(['list', '--format', 'json']);
    if (r.code !== 0 || !r.stdout.trim()) return [];
    return ((JSON.parse(r.stdout) as { id: string }[] | null) ?? []).map((c) => c.id);
  }
}
