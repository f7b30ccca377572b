/**
 * Box health checks (BoxLite `healthCheck` / `JsBoxInfo.healthStatus`, with Docker HEALTHCHECK
 * semantics): validation of the options, and the monitor that runs the check in a box on a timer.
 *
 * A check is one command run in the box (`Engine.exec`, not counted in the box's exec metrics). It passes
 * on exit code 0 and fails on any other exit, on a failure to start, or when it outlasts `timeout` (it is
 * then killed). States: `starting` from each start until the first passing check; `healthy` after a
 * passing check; `unhealthy` once `retries` checks in a row have failed. Failures during `startPeriod`
 * (counted from the box's start) do not count while the box is still `starting`. The first check runs
 * one `interval` after the start; the next one `interval` after the previous one ended (checks never
 * overlap).
 *
 * Where the status lives: the monitor of the runtime instance that created or started the box records
 * every result in the state database (`StateDb.setHealth`, with its process's identity), so every process
 * on that `homeDir` reads the same status. The monitor runs while that process lives (timers never keep a
 * process alive); when it is gone (a detached box outliving its creator), the next runtime instance that
 * loads the box (`get`, `getInfo`) takes the checks over (`StateDb.claimHealth`: one
 * process wins) and goes on from the recorded status.
 */
import type { Readable } from 'node:stream';
import { INIT_PATH } from '../engine/oci.ts';
import type { Engine } from '../engine/types.ts';
import { BoxError } from '../errors.ts';
import type { JsHealthStatus } from '../types.ts';

/** `JsHealthCheckOptions` with Docker's defaults applied; times in seconds. */
export interface NormalizedHealthCheck {
  interval: number;
  timeout: number;
  retries: number;
  startPeriod: number;
  /** Exec form, `['CMD', …]` or `['CMD-SHELL', script]`; absent: the image's HEALTHCHECK, else the probe. */
  command?: string[];
}

/** Default seconds between health checks (Docker's HEALTHCHECK default). */
export const DEFAULT_HEALTH_INTERVAL_SECS = 30;
/** Default seconds a health check may take (Docker's HEALTHCHECK default). */
export const DEFAULT_HEALTH_TIMEOUT_SECS = 30;
/** Default consecutive failures before `unhealthy` (Docker's HEALTHCHECK default). */
export const DEFAULT_HEALTH_RETRIES = 3;
/** Shortest accepted health check interval, seconds (each check is one command in the box). */
export const MIN_HEALTH_INTERVAL_SECS = 0.5;
/**
 * The check used when neither `healthCheck.command` nor the image gives one: the box still starts and
 * finishes a command (the engine's init binary, present in every box, printing its version).
 */
export const PROBE_COMMAND: readonly string[] = [INIT_PATH, '--version'];

function reject(field: string, rule: string): never {
  throw new BoxError(`invalid box option ${field}: ${rule}`, { field });
}

function seconds(value: unknown, field: string, fallback: number, min: number): number {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > 86_400) {
    reject(field, `must be a number of seconds from ${min} to 86400`);
  }
  return value;
}

function checkCommand(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  const field = 'healthCheck.command';
  if (!Array.isArray(value) || value.length === 0) reject(field, 'must be a non-empty array of strings');
  value.forEach((item, i) => {
    if (typeof item !== 'string' || item.includes('\0'))
      reject(`${field}[${i}]`, 'must be a string without NUL');
  });
  const [first, ...rest] = value as string[];
  if (first === '') reject(field, 'must name a program');
  if (first === 'NONE') reject(field, "'NONE' is not accepted; leave healthCheck out instead");
  if (first === 'CMD-SHELL' && (rest.length !== 1 || rest[0] === '')) {
    reject(field, "['CMD-SHELL', script] takes exactly one non-empty script");
  }
  if (first === 'CMD' && (rest.length === 0 || rest[0] === '')) {
    reject(field, "['CMD', program, ...args] must name a program");
  }
  return value as string[];
}

/**
 * Validates `JsBoxOptions.healthCheck` (BoxLite `JsHealthCheckOptions`, seconds) and applies Docker's
 * defaults: interval 30, timeout 30, retries 3, startPeriod 0.
 * @throws BoxError naming the field (`healthCheck.interval` …) for a value out of range or an unknown key.
 */
export function validateHealthCheck(value: unknown): NormalizedHealthCheck | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object' || Array.isArray(value)) {
    reject('healthCheck', 'must be an object { interval?, timeout?, retries?, startPeriod?, command? }');
  }
  const o = value as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!['interval', 'timeout', 'retries', 'startPeriod', 'command'].includes(key)) {
      reject(
        `healthCheck.${key}`,
        'is not a health check option (interval, timeout, retries, startPeriod, command)',
      );
    }
  }
  const retries = o.retries ?? DEFAULT_HEALTH_RETRIES;
  if (typeof retries !== 'number' || !Number.isInteger(retries) || retries < 1 || retries > 1000) {
    reject('healthCheck.retries', 'must be an integer from 1 to 1000');
  }
  const check: NormalizedHealthCheck = {
    interval: seconds(
      o.interval,
      'healthCheck.interval',
      DEFAULT_HEALTH_INTERVAL_SECS,
      MIN_HEALTH_INTERVAL_SECS,
    ),
    timeout: seconds(o.timeout, 'healthCheck.timeout', DEFAULT_HEALTH_TIMEOUT_SECS, 0.1),
    retries,
    startPeriod: seconds(o.startPeriod, 'healthCheck.startPeriod', 0, 0),
  };
  const command = checkCommand(o.command);
  if (command !== undefined) check.command = command;
  return check;
}

/**
 * The argv a check runs: `healthCheck.command`, else the image's HEALTHCHECK test, else
 * {@link PROBE_COMMAND}. `['CMD', …]` drops the marker; `['CMD-SHELL', s]` runs `/bin/sh -c s`.
 */
export function checkArgv(command: string[] | undefined, imageTest: string[] | null | undefined): string[] {
  const test = command ?? imageTest ?? [...PROBE_COMMAND];
  if (test[0] === 'CMD') return test.slice(1);
  if (test[0] === 'CMD-SHELL') return ['/bin/sh', '-c', test[1] ?? ''];
  return test;
}

/** The status a box with a health check has before its first check (and `none` without one). */
export function initialHealth(configured: boolean): JsHealthStatus {
  return { state: configured ? 'starting' : 'none', failures: 0 };
}

/** The public part of a stored status (without the monitoring process's identity). */
export function publicHealth(stored: JsHealthStatus & { monitor?: string }): JsHealthStatus {
  const { monitor: _monitor, ...status } = stored;
  return status;
}

function drain(stream: Readable): void {
  stream.on('error', () => {});
  stream.resume();
}

/**
 * Runs one check in a box: resolves true when `argv` exits 0 within `timeoutMs`, false otherwise (a
 * command still running at the deadline is killed). Never rejects.
 */
export async function runCheck(
  engine: Engine,
  id: string,
  argv: string[],
  timeoutMs: number,
): Promise<boolean> {
  let proc: Awaited<ReturnType<Engine['exec']>>;
  try {
    proc = await engine.exec(id, { cmd: argv[0]!, args: argv.slice(1), env: [], tty: false });
  } catch {
    return false;
  }
  proc.stdin.on('error', () => {});
  proc.stdin.end();
  drain(proc.stdout);
  drain(proc.stderr);
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([proc.exited.catch(() => -1), deadline]);
  clearTimeout(timer);
  if (outcome === 'timeout') {
    await proc.kill('SIGKILL').catch(() => {});
    return false;
  }
  return outcome === 0;
}

/** What the monitor needs from its runtime. */
export interface HealthMonitorDeps {
  /** Runs one check; resolves true when it passed. */
  check(id: string, argv: string[], timeoutMs: number): Promise<boolean>;
  /** Records a box's status (state database). */
  save(id: string, status: JsHealthStatus): void;
  /**
   * The box's state: `running` (checked), `paused` (frozen: the check is skipped and the box stays watched,
   * as Docker skips paused containers), `gone` (stopped or removed: the monitor stops watching it).
   */
  state(id: string): Promise<'running' | 'paused' | 'gone'>;
}

interface Watch {
  timer: NodeJS.Timeout | null;
  stopped: boolean;
}

/** Runs the health checks of the boxes one runtime instance created or started (see the module comment). */
export class HealthMonitor {
  readonly #deps: HealthMonitorDeps;
  readonly #watches = new Map<string, Watch>();

  /** @param deps how checks run and where results go. */
  constructor(deps: HealthMonitorDeps) {
    this.#deps = deps;
  }

  /**
   * Starts checking box `id` (replacing an earlier watch of it) from its start at `startedAtMs`
   * (`Date.now()` time): from `resume` (the recorded status of a box taken over from a monitor that is
   * gone), else from `starting`, which is recorded.
   */
  watch(
    id: string,
    check: NormalizedHealthCheck,
    argv: string[],
    startedAtMs: number,
    resume?: JsHealthStatus,
  ): void {
    this.unwatch(id);
    const watch: Watch = { timer: null, stopped: false };
    this.#watches.set(id, watch);
    let status = resume ?? initialHealth(true);
    if (!resume) this.#deps.save(id, status);
    const schedule = () => {
      if (watch.stopped) return;
      watch.timer = setTimeout(tick, check.interval * 1000);
      watch.timer.unref();
    };
    const tick = async () => {
      if (watch.stopped) return;
      const state = await this.#deps.state(id).catch(() => 'gone' as const);
      if (state === 'gone') {
        this.unwatch(id);
        return;
      }
      if (state === 'paused') {
        schedule();
        return;
      }
      const passed = await this.#deps.check(id, argv, check.timeout * 1000);
      if (watch.stopped) return;
      const inStartPeriod = Date.now() - startedAtMs < check.startPeriod * 1000;
      const lastCheck = new Date().toISOString();
      if (passed) status = { state: 'healthy', failures: 0, lastCheck };
      else if (inStartPeriod && status.state === 'starting') status = { ...status, lastCheck };
      else {
        const failures = status.failures + 1;
        const state = failures >= check.retries ? 'unhealthy' : status.state;
        status = { state, failures, lastCheck };
      }
      this.#deps.save(id, status);
      schedule();
    };
    schedule();
  }

  /** Stops checking box `id` (stop, remove); a check in flight finishes without being recorded. */
  unwatch(id: string): void {
    const watch = this.#watches.get(id);
    if (!watch) return;
    watch.stopped = true;
    if (watch.timer) clearTimeout(watch.timer);
    this.#watches.delete(id);
  }

  /** True while box `id` is watched by this monitor. */
  watching(id: string): boolean {
    return this.#watches.has(id);
  }

  /** Stops every watch. */
  close(): void {
    for (const id of [...this.#watches.keys()]) this.unwatch(id);
  }
}
