/**
 * Process-level helpers of the rootless engine: liveness, the processes of a box (by pid namespace,
 * which works with or without a cgroup), resource figures, and deleting a box's files as its root.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { BoxError } from '../errors.ts';
import { alive } from './host-process.ts';
import { readNetworkCounters } from './net-counters.ts';
import { CLK_TCK, readProcStat } from './proc-stat.ts';
import type { EngineStats } from './types.ts';

/** Host pids of every live process in the pid namespace of `init` (the box), init included. */
export function pidsOfBox(init: number): number[] {
  let ns: string;
  try {
    ns = readlinkSync(`/proc/${init}/ns/pid`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/ns/pid`) === ns && alive(Number(entry))) out.push(Number(entry));
    } catch {}
  }
  return out;
}

/** CPU time (user + system) of a process in clock ticks, 0 when gone. */
function cpuTicks(pid: number): number {
  const stat = readProcStat(pid);
  return stat ? stat.utime + stat.stime : 0;
}

const cpuSamples = new Map<string, { t: number; ticks: number }>();

/**
 * Resource usage of a running box (`Engine.stats`): memory from its cgroup (when it has one), CPU
 * percent of its allowance since the previous call from its processes' times (live processes only),
 * network counters from its namespace.
 */
export async function boxStats(id: string, init: number, cpus: number): Promise<EngineStats> {
  const out: EngineStats = {};
  const read = (file: string) => readFile(file, 'utf8').catch(() => undefined);
  const cgroups = (await read(`/proc/${init}/cgroup`)) ?? '';
  const memory = /^\d+:memory:(.*)$/m.exec(cgroups)?.[1];
  const unified = /^0::(.*)$/m.exec(cgroups)?.[1];
  const mem = memory
    ? await read(`/sys/fs/cgroup/memory${memory}/memory.usage_in_bytes`)
    : unified && unified !== '/'
      ? await read(`/sys/fs/cgroup${unified}/memory.current`)
      : undefined;
  if (mem !== undefined) out.memoryBytes = Number(mem.trim());
  const ticks = pidsOfBox(init).reduce((sum, p) => sum + cpuTicks(p), 0);
  const now = performance.now();
  const prev = cpuSamples.get(id);
  cpuSamples.set(id, { t: now, ticks });
  if (prev && now > prev.t) {
    const pct = ((((ticks - prev.ticks) / CLK_TCK) * 1000) / (now - prev.t) / cpus) * 100;
    out.cpuPercent = Math.min(100, Math.max(0, Math.round(pct * 10) / 10));
  }
  Object.assign(out, await readNetworkCounters(init));
  return out;
}

/**
 * Deletes `paths` from inside a user namespace with the box's mapping (`unshareArgs`), where the
 * caller is root over every box id: files a box user (a subordinate uid) made, and overlayfs's
 * mode-000 `work/work`, are removable there and not from outside.
 * @throws BoxError when `rm` fails.
 */
export function removeAsBoxRoot(unshareArgs: string[], paths: string[]): Promise<void> {
  if (paths.length === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', [...unshareArgs, '--', 'rm', '-rf', '--', ...paths], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.on('error', (e) =>
      reject(new BoxError(`removing box files failed: ${e.message}`, { code: 'internal' })),
    );
    child.on('exit', (code) => {
      if (code === 0) resolve();
      else reject(new BoxError(`removing box files failed: ${stderr.trim()}`, { code: 'internal' }));
    });
  });
}
