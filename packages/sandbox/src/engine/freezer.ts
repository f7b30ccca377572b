/**
 * Pausing and resuming a box with the kernel's cgroup freezer.
 *
 * Every box of both tiers runs in the cgroup `/seed-sandbox/<id>` (engine.ts and gvisor.ts set it as the
 * OCI `cgroupsPath`). On a cgroup v2 host the box is frozen by writing `1` to `<cgroup>/cgroup.freeze`
 * and is frozen once `<cgroup>/cgroup.events` says `frozen 1` (kernel Documentation/admin-guide/cgroup-v2.rst,
 * "Core Interface Files"). On a cgroup v1 or hybrid host, where the OCI runtime places boxes in the v1
 * hierarchies, the `freezer` controller is used: `FROZEN` written to `freezer.state`, frozen once reading
 * it back gives `FROZEN` (Documentation/admin-guide/cgroup-v1/freezer-subsystem.rst).
 *
 * A frozen box runs nothing: its processes are off every run queue and use no CPU until thawed; their
 * memory stays resident (no checkpoint). The state lives in the cgroup, so every process on the host
 * sees the same answer by reading it back; nothing is recorded elsewhere.
 *
 * The cgroup is located from `/proc/<init pid>/cgroup` as the kernel prints it for this (host) cgroup
 * namespace, and accepted only when it is exactly `/seed-sandbox/<id>`: a box's processes cannot move
 * their init out of its cgroup namespace, and nothing here writes to any other cgroup.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';

/** Freezer state of a box: `frozen`, `thawed`, or `freezing` (a freeze not yet complete). */
export type FreezerState = 'frozen' | 'thawed' | 'freezing';

/** How a box's cgroup is frozen: the v2 core interface or the v1 `freezer` controller. */
interface FreezerFiles {
  version: 1 | 2;
  /** Absolute path of the box's cgroup directory in that hierarchy. */
  dir: string;
}

/** The cgroup parent every box lives under (both tiers). */
const CGROUP_PARENT = 'seed-sandbox';
/** Polling interval while a freeze completes, ms. */
const POLL_MS = 1;

/** Mount point of the cgroup v2 hierarchy (`/sys/fs/cgroup` or `/sys/fs/cgroup/unified`), or null. */
function cgroup2Mount(): string | null {
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0 || !line.slice(dash + 3).startsWith('cgroup2 ')) continue;
    return line.split(' ')[4] ?? null;
  }
  return null;
}

/**
 * The freezer files of box `id` whose init has host pid `pid`, or null when the process is gone.
 * @throws BoxError `unsupported` when the box is not in its own `/seed-sandbox/<id>` cgroup under a
 *   freezer (no v1 freezer controller and no v2 cgroup of its own).
 */
function locate(id: string, pid: number): FreezerFiles | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return null;
  }
  const expected = `/${CGROUP_PARENT}/${id}`;
  let unified: string | undefined;
  for (const line of text.split('\n')) {
    const first = line.indexOf(':');
    const second = line.indexOf(':', first + 1);
    if (first < 0 || second < 0) continue;
    const controllers = line.slice(first + 1, second);
    const path = line.slice(second + 1);
    if (controllers.split(',').includes('freezer')) {
      if (path !== expected) break;
      const dir = join('/sys/fs/cgroup/freezer', path);
      if (existsSync(join(dir, 'freezer.state'))) return { version: 1, dir };
    }
    if (controllers === '' && line.startsWith('0:')) unified = path;
  }
  if (unified === expected) {
    const mount = cgroup2Mount();
    const dir = mount ? join(mount, unified) : undefined;
    if (dir && existsSync(join(dir, 'cgroup.freeze'))) return { version: 2, dir };
  }
  throw new BoxError(
    `box ${id}: its processes are not in a freezable cgroup of their own (${expected}); pause needs the cgroup freezer`,
    { code: 'unsupported' },
  );
}

function readState(files: FreezerFiles): FreezerState {
  if (files.version === 2) {
    const events = readFileSync(join(files.dir, 'cgroup.events'), 'utf8');
    if (/^frozen 1$/m.test(events)) return 'frozen';
    return readFileSync(join(files.dir, 'cgroup.freeze'), 'utf8').trim() === '1' ? 'freezing' : 'thawed';
  }
  const state = readFileSync(join(files.dir, 'freezer.state'), 'utf8').trim();
  return state === 'FROZEN' ? 'frozen' : state === 'FREEZING' ? 'freezing' : 'thawed';
}

/**
 * The freezer state of box `id` (init host pid `pid`), read from its cgroup; null when the init is gone.
 * @throws BoxError `unsupported` when the box has no freezable cgroup of its own.
 */
export function freezerState(id: string, pid: number): FreezerState | null {
  const files = locate(id, pid);
  if (!files) return null;
  try {
    return readState(files);
  } catch {
    return null;
  }
}

/**
 * Freezes every process of box `id` (init host pid `pid`) and resolves once the kernel reports the whole
 * cgroup frozen. Freezing a frozen box is a no-op.
 * @throws BoxError `conflict` when the init is gone, `timeout` when the freeze does not complete within
 *   `timeoutMs` (the box is thawed again), `unsupported` without a freezable cgroup.
 */
export async function freezeBox(id: string, pid: number, timeoutMs = 5000): Promise<void> {
  const files = locate(id, pid);
  if (!files) throw new BoxError(`box ${id}: not running; cannot pause it`, { code: 'conflict' });
  if (files.version === 2) writeFileSync(join(files.dir, 'cgroup.freeze'), '1');
  else writeFileSync(join(files.dir, 'freezer.state'), 'FROZEN');
  const deadline = performance.now() + timeoutMs;
  while (readState(files) !== 'frozen') {
    if (performance.now() > deadline) {
      thawFiles(files);
      throw new BoxError(`box ${id}: the freeze did not complete within ${timeoutMs} ms`, {
        code: 'timeout',
      });
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function thawFiles(files: FreezerFiles): void {
  if (files.version === 2) writeFileSync(join(files.dir, 'cgroup.freeze'), '0');
  else writeFileSync(join(files.dir, 'freezer.state'), 'THAWED');
}

/**
 * Thaws box `id` (init host pid `pid`): its processes run again where they stopped. Thawing a box that
 * is not frozen, or whose init is gone, is a no-op.
 * @throws BoxError `unsupported` without a freezable cgroup.
 */
export function thawBox(id: string, pid: number): void {
  const files = locate(id, pid);
  if (files) thawFiles(files);
}
