/**
 * The runsc command line of one gVisor engine (`nsenter --user=… --net=… -- runsc --root
 * <stateRoot>/runsc --platform=<p> --network=sandbox --ignore-cgroups`, gvisor-userns.ts) and the
 * runsc subcommands the engine's lifecycle uses: `state`, `ps`, `kill` (stopping a box), `delete`,
 * `list`. Every call runs runsc to completion (host-process.ts `run`, 30 s at most); the
 * caller reads the exit code.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';
import { alive, type RunResult, run, sleep } from './host-process.ts';
import { parseRuntimeState } from './oci-runtime.ts';
import type { EngineState } from './types.ts';

/**
 * A box's state as runsc reports it (`runsc state`, oci-runtime.ts `parseRuntimeState`), before the
 * engine checks the pid: `pid` is the host pid of the sandbox process (the Sentry).
 */
export type RunscState = EngineState;

/** runsc with the engine's global flags; `runtime` is the full command line before a subcommand. */
export class Runsc {
  /**
   * `[...prefix, runsc, --root, <root>, --platform=…, --network=sandbox]`, plus `--ignore-cgroups`
   * with a prefix (the engine's launcher makes and joins the box's cgroup, gvisor-launcher.ts).
   */
  readonly runtime: string[];
  private readonly root: string;

  /**
   * `runsc` is the binary's absolute path, `root` runsc's state directory, `platform` `ptrace` or
   * `kvm`, `prefix` the command that enters the gVisor user namespace (`inGVisorNamespaces`).
   */
  constructor(runsc: string, root: string, platform: string, prefix: string[] = []) {
    this.root = root;
    this.runtime = [...prefix, runsc, '--root', root, `--platform=${platform}`, '--network=sandbox'];
    if (prefix.length > 0) this.runtime.push('--ignore-cgroups');
  }

  /**
   * `runtime` with the sandbox network `mode` in place of `--network=sandbox` (`none`: netstack's
   * loopback only, in a network namespace runsc makes).
   */
  withNetwork(mode: 'sandbox' | 'none'): string[] {
    return this.runtime.map((a) => (a === '--network=sandbox' ? `--network=${mode}` : a));
  }

  /** Runs `runsc <global flags> <args…>`. */
  call(args: string[]): Promise<RunResult> {
    return run(this.runtime[0] as string, [...this.runtime.slice(1), ...args]);
  }

  /** True while runsc keeps state for box `id` (`<root>/<id>_sandbox:<id>.state`, from run to delete). */
  known(id: string): boolean {
    return existsSync(join(this.root, `${id}_sandbox:${id}.state`));
  }

  /** `runsc state <id>`; undefined when runsc does not know the box, `unknown` when its answer is unreadable. */
  async state(id: string): Promise<RunscState | undefined> {
    const r = await this.call(['state', id]);
    return r.code === 0 ? parseRuntimeState(r.stdout) : undefined;
  }

  /** Pids (inside the sandbox) of the box's processes, from `runsc ps`; empty when it is not running. */
  async guestPids(id: string): Promise<number[]> {
    const r = await this.call(['ps', '--format', 'json', id]);
    if (r.code !== 0) return [];
    try {
      return (JSON.parse(r.stdout) as number[] | null) ?? [];
    } catch {
      return [];
    }
  }

  /**
   * Sends SIGTERM to every process of the box but its init (pid 1: its exit would end the sandbox at
   * once) and waits up to `graceMs` ms, polling every 50 ms, for them to exit.
   */
  async terminateCommands(id: string, graceMs: number): Promise<void> {
    const others = async () => (await this.guestPids(id)).filter((p) => p !== 1);
    let pids = await others();
    if (pids.length === 0) return;
    await Promise.all(pids.map((p) => this.call(['kill', '--pid', String(p), id, 'TERM'])));
    const deadline = performance.now() + graceMs;
    while (pids.length > 0 && performance.now() < deadline) {
      await sleep(50);
      pids = await others();
    }
  }

  /**
   * Stops box `id` whose sandbox process is host pid `pid`: with `graceMs` > 0 SIGTERM to its
   * commands first (`terminateCommands`), then SIGKILL to its init, which ends the sandbox; waits up
   * to 5 s for the sandbox process to be gone.
   */
  async stopSandbox(id: string, pid: number, graceMs: number): Promise<void> {
    if (graceMs > 0) await this.terminateCommands(id, graceMs);
    if (alive(pid)) await this.call(['kill', id, 'KILL']);
    for (let i = 0; i < 500 && alive(pid); i++) await sleep(10);
  }

  /**
   * `runsc delete --force <id>`.
   * @throws BoxError when runsc fails for another reason than not knowing the box.
   */
  async delete(id: string): Promise<void> {
    const del = await this.call(['delete', '--force', id]);
    if (del.code !== 0 && !/does not exist|not exist|No such file|not found/i.test(del.stderr)) {
      throw new BoxError(`box ${id}: deleting the gVisor sandbox failed: ${del.stderr.trim()}`, {
        code: 'internal',
      });
    }
  }

  /**
   * Ids of the boxes runsc has state for (`runsc list`); empty when it fails.
   * @throws SyntaxError when runsc's output is not JSON.
   */
  async list(): Promise<string[]> {
    const r = await this.call(['list', '--format', 'json']);
    if (r.code !== 0 || !r.stdout.trim()) return [];
    return ((JSON.parse(r.stdout) as { id: string }[] | null) ?? []).map((c) => c.id);
  }
}
