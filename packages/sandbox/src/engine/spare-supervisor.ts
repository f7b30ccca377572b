/**
 * A box supervisor started ahead of need (scripts.ts `SUPERVISOR_SPARE_SH`): an idle `/bin/sh` whose
 * stdin is a pipe from this process, waiting for the path of a file with a box's supervisor
 * environment. Given one it loads it and execs `/bin/sh supervisor.sh` in the same process (same pid,
 * same stdin: the parent-death pipe), so the supervisor of that box runs as if spawned for it — same
 * command line and environment — while the Node `spawn` (≈ 4 ms of this process's event loop blocked
 * here) and the idle shell's own start happened before the box was asked for. An idle spare whose
 * creator exits reads end-of-file and exits; it holds no box and no mount. ENGINE.md "Start path".
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { alive } from './host-process.ts';

/** How long the engine must have started no box and run no command before it makes a spare, ms. */
export const SPARE_IDLE_MS = 100;

/**
 * At most one idle spare supervisor of an engine. `make` spawns one when none is idle; `take` hands it
 * over for one box (host-process.ts `startSupervisor` gives it the box's environment).
 */
export class SpareSupervisor {
  #child: ChildProcess | undefined;
  #starting = 0;
  #lastActivity = 0;
  #timer: NodeJS.Timeout | undefined;

  /**
   * @param spareScript the spare's script (`SUPERVISOR_SPARE_SH`), run as `/bin/sh <spareScript>
   *   <supervisorScript>`.
   * @param supervisorScript the supervisor script it execs once it has a box.
   */
  constructor(spareScript: string, supervisorScript: string) {
    this.spareScript = spareScript;
    this.supervisorScript = supervisorScript;
  }
  private readonly spareScript: string;
  private readonly supervisorScript: string;

  /** Spawns an idle spare unless one is idle already. Errors are ignored (the box then gets a spawn of its own). */
  make(): void {
    if (this.#child && this.#idle(this.#child)) return;
    try {
      const child = spawn('/bin/sh', [this.spareScript, this.supervisorScript], {
        env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
        detached: true,
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      child.on('error', () => {});
      child.stdin?.on('error', () => {});
      // An idle spare never keeps this process running.
      child.unref();
      (child.stdin as unknown as { unref?: () => void }).unref?.();
      (child.stdout as unknown as { unref?: () => void }).unref?.();
      this.#child = child;
    } catch {
      this.#child = undefined;
    }
  }

  /**
   * The idle spare, taken (the next `make` spawns another), with its handles referenced again;
   * undefined when there is none or it has exited.
   */
  take(): ChildProcess | undefined {
    const child = this.#child;
    this.#child = undefined;
    if (!child || !this.#idle(child)) return undefined;
    child.ref();
    (child.stdin as unknown as { ref?: () => void }).ref?.();
    (child.stdout as unknown as { ref?: () => void }).ref?.();
    return child;
  }

  /** A box start begins: no spare is made until it ends and the engine has been idle `SPARE_IDLE_MS`. */
  startBegins(): void {
    this.#starting++;
    this.#lastActivity = performance.now();
  }

  /** A box start ended (either way): a spare is made once the engine has been idle `SPARE_IDLE_MS`. */
  startEnds(): void {
    this.#starting--;
    this.activity();
  }

  /** A command starts in a box (or the engine did something else a spawn must not delay): the idle clock restarts. */
  activity(): void {
    this.#lastActivity = performance.now();
    this.#schedule(SPARE_IDLE_MS);
  }

  /** A box was stopped: a spare is made now when no start is in flight (its spawn then delays no box). */
  boxStopped(): void {
    if (this.#starting === 0) this.make();
  }

  #schedule(ms: number): void {
    if (this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      const idleFor = performance.now() - this.#lastActivity;
      if (this.#starting > 0 || idleFor < SPARE_IDLE_MS) this.#schedule(Math.max(1, SPARE_IDLE_MS - idleFor));
      else this.make();
    }, ms);
    this.#timer.unref();
  }

  /** Whether `child` still waits for a box (not exited, not a zombie). */
  #idle(child: ChildProcess): boolean {
    return (
      child.exitCode === null && child.signalCode === null && child.pid !== undefined && alive(child.pid)
    );
  }
}
