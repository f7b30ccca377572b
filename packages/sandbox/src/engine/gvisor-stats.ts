/**
 * Resource usage of a running gVisor box, read on the host: memory and CPU of the sandbox's cgroup
 * (box processes plus the Sentry and gofer, one cgroup, v1 or v2), network counters of the box's
 * network namespace, where the Sentry's host sockets carry all of the box's traffic.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { processAgeMs } from './host-process.ts';
import { readNetworkCounters } from './net-counters.ts';
import type { EngineStats } from './types.ts';

/** A cumulative CPU reading: when (`performance.now()` ms) and the cgroup's CPU time then, ns. */
export interface CpuSample {
  t: number;
  usageNs: number;
}

/**
 * Usage of the sandbox whose host pid is `pid`. `cpuPercent` is the share of `cpus` cores used since
 * `prev` (since the sandbox started when `prev` is absent), 0–100, one decimal; the new sample is
 * given to `record` for the next call. Fields whose files cannot be read are left out; never throws.
 */
export async function sandboxStats(
  pid: number,
  cpus: number,
  prev: CpuSample | undefined,
  record: (sample: CpuSample) => void,
): Promise<EngineStats> {
  const read = (file: string) => readFile(file, 'utf8').catch(() => undefined);
  const cg = new Map<string, string>();
  for (const line of ((await read(`/proc/${pid}/cgroup`)) ?? '').split('\n')) {
    const [, ctrls, path] = line.split(':', 3);
    if (ctrls === undefined || path === undefined) continue;
    for (const c of ctrls.split(',')) cg.set(c, path);
  }
  const v1 = existsSync('/sys/fs/cgroup/memory');
  const out: EngineStats = {};
  const unified = cg.get('');
  const mem = v1
    ? await read(join('/sys/fs/cgroup/memory', cg.get('memory') ?? '/', 'memory.usage_in_bytes'))
    : unified !== undefined
      ? await read(join('/sys/fs/cgroup', unified, 'memory.current'))
      : undefined;
  if (mem !== undefined) out.memoryBytes = Number(mem.trim());
  let usageNs: number | undefined;
  if (v1) {
    const u = await read(join('/sys/fs/cgroup/cpuacct', cg.get('cpuacct') ?? '/', 'cpuacct.usage'));
    if (u !== undefined) usageNs = Number(u.trim());
  } else if (unified !== undefined) {
    const m = (await read(join('/sys/fs/cgroup', unified, 'cpu.stat')))?.match(/usage_usec (\d+)/);
    if (m) usageNs = Number(m[1]) * 1000;
  }
  if (usageNs !== undefined) {
    const now = performance.now();
    const before = prev ?? { t: now - processAgeMs(pid), usageNs: 0 };
    record({ t: now, usageNs });
    const dt = now - before.t;
    if (dt > 0) {
      const pct = ((usageNs - before.usageNs) / 1e6 / dt / cpus) * 100;
      out.cpuPercent = Math.min(100, Math.max(0, Math.round(pct * 10) / 10));
    }
  }
  Object.assign(out, await readNetworkCounters(pid));
  return out;
}
