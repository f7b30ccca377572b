/**
 * Reading a box's cgroup on the host for the root engines (crun/runc and gVisor, cgroup v1 or v2):
 * the cgroup path of each controller of a process, the pids in a box, and its resource usage
 * (`Engine.stats`: memory, CPU share of its allowance, network counters of its namespace). For a
 * gVisor box the cgroup holds the whole sandbox (box processes plus the Sentry and gofer).
 */
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { processAgeMs } from './host-process.ts';
import { readNetworkCounters } from './net-counters.ts';
import type { EngineStats } from './types.ts';

/** Cgroup path of each controller of a process (relative to its hierarchy); `unified`: cgroup v2. */
export interface CgroupPaths {
  memory?: string;
  cpu?: string;
  cpuacct?: string;
  pids?: string;
  unified?: string;
}

/** A cumulative CPU reading: when (`performance.now()` ms) and the cgroup's CPU time then, ns. */
export interface CpuSample {
  t: number;
  usageNs: number;
}

/**
 * The cgroup path of each controller for host process `pid`, from `/proc/<pid>/cgroup` (`unified`
 * only on a host without v1 controllers). Empty when the process is gone.
 */
export function readCgroupPaths(pid: number): CgroupPaths {
  const out: CgroupPaths = {};
  let text = '';
  try {
    text = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return out;
  }
  const v1 = existsSync('/sys/fs/cgroup/memory');
  for (const line of text.split('\n')) {
    const [, ctrls, path] = line.split(':', 3) as [string, string | undefined, string | undefined];
    if (ctrls === undefined || path === undefined) continue;
    if (ctrls === '' && !v1) out.unified = path;
    for (const c of ctrls.split(',')) {
      if (c === 'memory') out.memory = path;
      if (c === 'cpu') out.cpu = path;
      if (c === 'cpuacct') out.cpuacct = path;
      if (c === 'pids') out.pids = path;
    }
  }
  return out;
}

/** Host pids of every process in the box of init `pid` (its pids cgroup), empty when unreadable. */
export function boxPids(pid: number): number[] {
  const cg = readCgroupPaths(pid);
  const file = cg.pids
    ? join('/sys/fs/cgroup/pids', cg.pids, 'cgroup.procs')
    : cg.unified
      ? join('/sys/fs/cgroup', cg.unified, 'cgroup.procs')
      : undefined;
  if (!file) return [];
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * Usage of the box whose init (or gVisor sandbox process) is host pid `pid`: `memoryBytes` of its
 * cgroup (v1 `memory.usage_in_bytes`, v2 `memory.current`); `cpuPercent`, the share of its CPU
 * allowance used since `prev` (since the process started when `prev` is absent), 0–100 with one
 * decimal, where the allowance is the cgroup's CFS quota in cores, else `cpus`; and the network
 * counters of its namespace. The new CPU sample is given to `record` for the next call. Fields whose
 * files cannot be read are left out; never throws.
 */
export async function cgroupStats(
  pid: number,
  cpus: number,
  prev: CpuSample | undefined,
  record: (sample: CpuSample) => void,
): Promise<EngineStats> {
  const cg = readCgroupPaths(pid);
  const out: EngineStats = {};
  const read = (file: string): Promise<string | undefined> => readFile(file, 'utf8').catch(() => undefined);
  const mem = cg.memory
    ? await read(join('/sys/fs/cgroup/memory', cg.memory, 'memory.usage_in_bytes'))
    : cg.unified
      ? await read(join('/sys/fs/cgroup', cg.unified, 'memory.current'))
      : undefined;
  if (mem !== undefined) out.memoryBytes = Number(mem.trim());
  let usageNs: number | undefined;
  if (cg.cpuacct) {
    const u = await read(join('/sys/fs/cgroup/cpuacct', cg.cpuacct, 'cpuacct.usage'));
    if (u !== undefined) usageNs = Number(u.trim());
  } else if (cg.unified) {
    const m = (await read(join('/sys/fs/cgroup', cg.unified, 'cpu.stat')))?.match(/usage_usec (\d+)/);
    if (m) usageNs = Number(m[1]) * 1000;
  }
  let cores: number | undefined;
  if (cg.cpu) {
    const q = await read(join('/sys/fs/cgroup/cpu', cg.cpu, 'cpu.cfs_quota_us'));
    const per = await read(join('/sys/fs/cgroup/cpu', cg.cpu, 'cpu.cfs_period_us'));
    if (q && per && Number(q) > 0) cores = Number(q) / Number(per);
  } else if (cg.unified) {
    const m = (await read(join('/sys/fs/cgroup', cg.unified, 'cpu.max')))?.match(/^(\d+) (\d+)/);
    if (m) cores = Number(m[1]) / Number(m[2]);
  }
  cores ??= cpus;
  if (usageNs !== undefined) {
    const now = performance.now();
    const before = prev ?? { t: now - processAgeMs(pid), usageNs: 0 };
    record({ t: now, usageNs });
    const dt = now - before.t;
    if (dt > 0) {
      const pct = ((usageNs - before.usageNs) / 1e6 / dt / cores) * 100;
      out.cpuPercent = Math.min(100, Math.max(0, Math.round(pct * 10) / 10));
    }
  }
  Object.assign(out, await readNetworkCounters(pid));
  return out;
}
