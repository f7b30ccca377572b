/**
 * Helpers of the rootless tests (issue 16): the prepared test account, running a child test process
 * as that account, and host-state snapshots for the host-untouched assertions.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
// internal: subordinate-id parsing reads /etc/subuid as the engine does
import { parseSubid, type SubidEntry } from '../src/engine/idmap.ts';

// internal: the rootless host checks the rootless tests compare against
export { cgroupDelegation, cgroupMounts, delegatedControllers } from '../src/engine/rootless-host.ts';

/** The account `npm run test:setup` prepares with `sandbox setup`. */
export const ROOTLESS_TEST_USER = 'sbxuser';

/**
 * The account `npm run test:setup` makes for `sandbox setup` to be tested on (no subordinate ids, no
 * delegated cgroup subtree between test runs).
 */
export const SETUP_TEST_USER = 'sbxsetup';

/** `name:start:count` lines of a subordinate id file. */
export function parseRanges(text: string): SubidEntry[] {
  return parseSubid(text);
}

/** Host mount points (from `/proc/self/mountinfo`), for a before/after comparison. */
export function hostMounts(): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split(' ')[4]!)
    .sort();
}

/**
 * Environment variable a test file sets (to its own name) on what it runs as `ROOTLESS_TEST_USER`, so
 * that a file checking the account's processes can tell those of another file running meanwhile.
 */
export const TEST_FILE_ENV = 'SEED_TEST_FILE';

/**
 * True when the environment of process `pid` names, in `TEST_FILE_ENV`, a test file other than `own`
 * (false when it names none, names `own`, or cannot be read).
 */
export function startedByOtherTestFile(pid: string | number, own: string): boolean {
  let environ: string;
  try {
    environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return false;
  }
  const entry = environ.split('\0').find((e) => e.startsWith(`${TEST_FILE_ENV}=`));
  return entry !== undefined && entry !== `${TEST_FILE_ENV}=${own}`;
}

/** Host pids whose command line mentions `needle`. */
export function processesMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(needle)) pids.push(Number(entry));
    } catch {}
  }
  return pids;
}

/** Uid (real, effective, saved, fs) of a host process from `/proc/<pid>/status`. */
export function processUids(pid: number): number[] {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Uid:'));
  return (line ?? '').split(/\s+/).slice(1).filter(Boolean).map(Number);
}

/** Runs a shell command as `user` and returns its output (status 0 required by the caller). */
export function runAs(
  user: string,
  command: string,
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('runuser', ['-u', user, '--', 'sh', '-c', command], { encoding: 'utf8', cwd: '/' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
