/**
 * Host tuning for cgroup v1 and hybrid hosts: the `favordynmods` cgroup mount option.
 *
 * Every `crun exec` moves the new process into the box's cgroups by writing its pid to `cgroup.procs`
 * of each v1 hierarchy (`CLONE_INTO_CGROUP` needs cgroup v2). By default the kernel guards those
 * writes with a global per-CPU rwsem whose write side waits for an RCU grace period after a quiet
 * spell: measured here (kernel 6.18, HZ 250, 2 vCPUs) a move took 10.3 ms p50 (0.2–21 ms) when
 * 100 ms apart and 0.02 ms back to back, so the first command after a pause (a warm pool's hand-out,
 * an agent's next turn) paid ~10 ms in that write alone. With `favordynmods` (cgroup(7) mount
 * option, kernel ≥ 6.0; on 6.18 it also switches `cgroup.procs` writes to a per-thread-group rwsem)
 * the same move takes 0.19 ms p50. The kernel's documented cost is slower forks and exits (the
 * read side of that rwsem); fork + exit + wait of a small process measured 1.14–1.21 ms before and
 * 1.08–1.81 ms after (noise of the shared VM; no difference found). The option is global: setting it
 * on one hierarchy affects all, and on 6.18 it cannot be turned off until reboot.
 *
 * `scripts/setup.ts` (`npm run test:setup`, run by CI) applies it; the engine never remounts anything itself.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** What `ensureFavorDynmods` found or did. */
export interface FavorDynmodsResult {
  /** `set` (remounted now), `already` (a cgroup mount has it), `not-needed` (pure cgroup v2), `failed`. */
  outcome: 'set' | 'already' | 'not-needed' | 'failed';
  /** The mount point remounted or found, when there is one. */
  mountPoint?: string;
  /** The reason of `failed`: the `mount` command's message. */
  reason?: string;
}

interface CgroupMount {
  mountPoint: string;
  type: 'cgroup' | 'cgroup2';
  superOptions: string[];
}

/** cgroup and cgroup2 mounts of `/proc/self/mountinfo` text (mount point, type, super options). */
export function cgroupMounts(mountinfo: string): CgroupMount[] {
  const out: CgroupMount[] = [];
  for (const line of mountinfo.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const [type, , superOpts = ''] = line.slice(sep + 3).split(' ');
    if (type !== 'cgroup' && type !== 'cgroup2') continue;
    const mountPoint = (line.split(' ')[4] ?? '').replace(/\\(\d{3})/g, (_, o: string) =>
      String.fromCharCode(Number.parseInt(o, 8)),
    );
    out.push({ mountPoint, type, superOptions: superOpts.split(',') });
  }
  return out;
}

/**
 * Makes sure the host's cgroup hierarchies favour dynamic modifications (`favordynmods`) when boxes
 * live in cgroup v1 hierarchies (v1 or hybrid host): remounts the cgroup2 mount (or else the first v1
 * one) with it. Needs root in the initial mount namespace; idempotent; never throws.
 */
export function ensureFavorDynmods(mountinfo?: string): FavorDynmodsResult {
  let text = mountinfo;
  try {
    text ??= readFileSync('/proc/self/mountinfo', 'utf8');
  } catch (error) {
    return { outcome: 'failed', reason: (error as Error).message };
  }
  const mounts = cgroupMounts(text);
  const v1 = mounts.filter((m) => m.type === 'cgroup');
  if (v1.length === 0) return { outcome: 'not-needed' };
  const has = mounts.find((m) => m.superOptions.includes('favordynmods'));
  if (has) return { outcome: 'already', mountPoint: has.mountPoint };
  const target = mounts.find((m) => m.type === 'cgroup2') ?? v1[0]!;
  const r = spawnSync('mount', ['-o', 'remount,favordynmods', target.mountPoint], { encoding: 'utf8' });
  if (r.status !== 0) {
    return { outcome: 'failed', mountPoint: target.mountPoint, reason: (r.stderr || String(r.error)).trim() };
  }
  return { outcome: 'set', mountPoint: target.mountPoint };
}
