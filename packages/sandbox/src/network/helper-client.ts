/**
 * Talking to the network helper (`helper.ts`) of a network state directory, and starting it on
 * demand the way the lifetime reaper is started (`runtime/reaper.ts`): `flock -n <dir>/lock` around a
 * shell loop that runs `node helper-main.ts <dir>` again whenever it ends other than by exiting 0
 * (killed, crashed), in a session of its own, so it outlives the process that started it. The lock
 * decides: a second start while one loop holds it exits at once. The running helper writes its
 * `pid:starttime` to `<dir>/pid`.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ownerAlive } from '../engine/proc-stat.ts';
import { BoxError, isBoxErrorCode } from '../errors.ts';
import type { HelperAnswer, HelperRequest } from './helper.ts';

/** Where the helpers' directories live: on `/run` (a tmpfs on usual hosts; secrets stay off disk). */
export const HELPER_ROOT = '/run/seed-sandbox/net-helper';
/** How long a call waits for a helper to answer (starting one included), ms. */
export const HELPER_CALL_TIMEOUT_MS = 20_000;
/** Seconds the restart loop waits before running a helper that ended badly again. */
const RESTART_DELAY_S = '0.3';

/**
 * The helper directory of network state directory `stateDir`:
 * `/run/seed-sandbox/net-helper/<first 16 hex of sha256(stateDir)>` (short, for the socket path).
 */
export function helperDir(stateDir: string): string {
  return join(HELPER_ROOT, createHash('sha256').update(stateDir).digest('hex').slice(0, 16));
}

/** The pid of the running helper of `dir`, or null when none runs. */
export function helperPid(dir: string): number | null {
  try {
    const owner = readFileSync(join(dir, 'pid'), 'utf8').trim();
    return ownerAlive(owner) ? Number(owner.split(':')[0]) : null;
  } catch {
    return null;
  }
}

/**
 * Starts the helper of `dir` when it has boxes (state files) or spare gateways (their records,
 * `spares.ts`) and none runs: a runtime opening a home calls this, so boxes whose helper loop was
 * killed as a whole get their policy served again, and spares such a helper left are ended (by the
 * helper's start; it exits after a while without boxes).
 */
export function resumeHelper(dir: string): void {
  const recorded = (sub: string) => {
    try {
      return readdirSync(join(dir, sub)).some((name) => name.endsWith('.json'));
    } catch {
      return false;
    }
  };
  if (recorded('boxes') || recorded('spares')) ensureHelper(dir);
}

/** Starts the helper of `dir` unless one runs; returns at once (it starts in the background). */
export function ensureHelper(dir: string): void {
  if (helperPid(dir) !== null) return;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const self = fileURLToPath(import.meta.url);
  const main = join(self, '..', `helper-main${self.slice(self.lastIndexOf('.'))}`);
  const loop = `until "$0" "$1" "$2" >>"$2/log" 2>&1; do sleep ${RESTART_DELAY_S}; done`;
  // The helper gets no more of this process's environment than it uses: PATH for nft, ip and nsenter,
  // and the extra CAs its secrets proxy verifies upstream servers with. Name lookups of all boxes of
  // the home share its libuv thread pool, hence more threads than Node's default 4.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    UV_THREADPOOL_SIZE: '16',
  };
  if (process.env.NODE_EXTRA_CA_CERTS) env.NODE_EXTRA_CA_CERTS = process.env.NODE_EXTRA_CA_CERTS;
  const child = spawn(
    'flock',
    ['-n', '-E', '0', join(dir, 'lock'), 'sh', '-c', loop, process.execPath, main, dir],
    { detached: true, stdio: 'ignore', env },
  );
  child.on('error', () => {});
  child.unref();
}

/** One request over the helper's socket; rejects with the socket error when nothing listens. */
function once(dir: string, request: HelperRequest, timeoutMs: number): Promise<HelperAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(join(dir, 'sock'));
    let data = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new BoxError('the network helper did not answer in time', { code: 'unavailable' }));
    }, timeoutMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('end', () => {
      clearTimeout(timer);
      try {
        resolve(JSON.parse(data) as HelperAnswer);
      } catch {
        reject(Object.assign(new Error('the network helper closed the connection'), { code: 'ECONNRESET' }));
      }
    });
    socket.on('connect', () => socket.write(`${JSON.stringify(request)}\n`));
  });
}

/**
 * Sends `request` to the helper of `dir`, starting the helper when none answers (and again while it
 * restarts), until `timeoutMs` (default {@link HELPER_CALL_TIMEOUT_MS}) has passed.
 * @returns the helper's successful answer.
 * @throws BoxError with the helper's code (`invalid_option` naming the field, `not_found`, …), or
 *   `unavailable` when no helper answered in time.
 */
export async function callHelper(
  dir: string,
  request: HelperRequest,
  options: { start?: boolean; timeoutMs?: number } = {},
): Promise<Extract<HelperAnswer, { ok: true }>> {
  const deadline = Date.now() + (options.timeoutMs ?? HELPER_CALL_TIMEOUT_MS);
  let wait = 20;
  for (;;) {
    let answer: HelperAnswer;
    try {
      answer = await once(dir, request, Math.max(1, deadline - Date.now()));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const retry = code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'ECONNRESET';
      if (!retry || options.start === false || Date.now() >= deadline) {
        throw new BoxError(`the network helper in ${dir} is not running: ${(error as Error).message}`, {
          code: 'unavailable',
          cause: error,
        });
      }
      ensureHelper(dir);
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 200);
      continue;
    }
    if (answer.ok) return answer;
    const code = isBoxErrorCode(answer.code) ? answer.code : 'internal';
    throw new BoxError(answer.message, answer.field ? { code, field: answer.field } : { code });
  }
}
