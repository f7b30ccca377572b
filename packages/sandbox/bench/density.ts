/**
 * Density benchmark (issue 18): starts N idle `busybox:latest` boxes with the network on (default 100)
 * and reports the host memory each costs:
 *  - PSS (`/proc/<pid>/smaps_rollup`) of every per-box process, by kind: the box's own processes (its
 *    cgroup: the `catatonit` init), the parent-death watch (`supervisor.sh`, non-detached boxes only) and
 *    the user-mode network (`slirp4netns`, pid from `<homeDir>/engine/net/<id>.json`);
 *  - the memory charged to the box's cgroup (its pages, page cache of its files, kernel objects);
 *  - the drop of the host's `MemAvailable` per box (noisy on a shared machine), which also counts what no process owns (kernel
 *    memory of namespaces, cgroups, the overlay and disk mounts, page cache of the box disks);
 * then the time to start them, and what would run out first at this rate (memory, pids).
 * The peer is the same boxes with the network off (no slirp4netns), started in the same run when
 * `--compare` is given. The load average is printed before and after.
 *
 * Usage (root): `npm run bench:density -w @seed/sandbox` or `node bench/density.ts [N] [--detach] [--compare]`.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBox } from '../src/runtime/box.ts';
import { percentile } from './raw.ts';

const args = process.argv.slice(2);
const count = Number(args.find((a) => /^\d+$/.test(a)) ?? 100);
const detach = args.includes('--detach');
const compare = args.includes('--compare');
const IMAGE = 'busybox:latest';

function ensureRegistry(): void {
  const script = join(import.meta.dirname, '..', 'scripts', 'registry.ts');
  const result = spawnSync(process.execPath, [script, '--quiet', '--images', 'busybox'], {
    stdio: 'inherit',
  });
  if (result.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
}

/** PSS of a process, KiB (0 when it is gone). */
function pssKib(pid: number): number {
  try {
    const m = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8').match(/^Pss:\s+(\d+) kB/m);
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function memAvailableKib(): number {
  return Number(readFileSync('/proc/meminfo', 'utf8').match(/^MemAvailable:\s+(\d+) kB/m)?.[1] ?? 0);
}

function readPid(file: string, field?: string): number {
  try {
    const text = readFileSync(file, 'utf8');
    return field
      ? Number((JSON.parse(text) as Record<string, unknown>)[field]) || 0
      : Number.parseInt(text, 10) || 0;
  } catch {
    return 0;
  }
}

/** Memory charged to the box's cgroup, KiB (its processes' pages, page cache and kernel objects). */
function cgroupKib(id: string): number {
  for (const file of [
    `/sys/fs/cgroup/memory/seed-sandbox/${id}/memory.usage_in_bytes`,
    `/sys/fs/cgroup/seed-sandbox/${id}/memory.current`,
  ]) {
    try {
      return Number(readFileSync(file, 'utf8')) / 1024;
    } catch {}
  }
  return 0;
}

/** Pids of the box's cgroup (freezer, v1 hosts; else the unified hierarchy). */
function boxPids(id: string): number[] {
  for (const dir of [`/sys/fs/cgroup/pids/seed-sandbox/${id}`, `/sys/fs/cgroup/seed-sandbox/${id}`]) {
    try {
      return readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number);
    } catch {}
  }
  return [];
}

interface Measure {
  label: string;
  startMs: number[];
  perBoxKib: { box: number[]; supervisor: number[]; network: number[]; total: number[]; cgroup: number[] };
  memAvailableDropKib: number;
}

async function measure(runtime: JsRuntime, home: string, network: 'enabled' | 'disabled'): Promise<Measure> {
  const label = `network ${network}${detach ? ', detached' : ''}`;
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const before = memAvailableKib();
  const boxes: JsBox[] = [];
  const startMs: number[] = [];
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    boxes.push(await runtime.create({ image: IMAGE, network: { mode: network }, detach, memoryMib: 64 }));
    startMs.push(performance.now() - t0);
  }
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const after = memAvailableKib();
  const perBoxKib = {
    box: [] as number[],
    supervisor: [] as number[],
    network: [] as number[],
    total: [] as number[],
    cgroup: [] as number[],
  };
  for (const box of boxes) {
    const own = boxPids(box.id).reduce((sum, pid) => sum + pssKib(pid), 0);
    const supervisor = pssKib(readPid(join(home, 'boxes', box.id, 'bundle', 'supervisor.pid')));
    const net = pssKib(readPid(join(home, 'engine', 'net', `${box.id}.json`), 'slirpPid'));
    perBoxKib.box.push(own);
    perBoxKib.supervisor.push(supervisor);
    perBoxKib.network.push(net);
    perBoxKib.total.push(own + supervisor + net);
    perBoxKib.cgroup.push(cgroupKib(box.id));
  }
  for (const box of boxes) await runtime.remove(box.id, true);
  return { label, startMs, perBoxKib, memAvailableDropKib: (before - after) / count };
}

async function main(): Promise<void> {
  ensureRegistry();
  const home = mkdtempSync('/tmp/sandbox-bench-density-');
  const runtime = new JsRuntime({
    homeDir: home,
    imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
  });
  const loadBefore = loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
  const results: Measure[] = [];
  try {
    await runtime.images.pull(IMAGE);
    results.push(await measure(runtime, home, 'enabled'));
    if (compare) results.push(await measure(runtime, home, 'disabled'));
  } finally {
    for (const info of await runtime.listInfo()) await runtime.remove(info.id, true).catch(() => {});
    rmSync(home, { recursive: true, force: true });
  }
  const mib = (kib: number) => (kib / 1024).toFixed(2);
  const avail = memAvailableKib();
  const pidMax = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'));
  console.log(`\ndensity benchmark: ${count} idle ${IMAGE} boxes, node ${process.version}`);
  console.log(
    `load average before: ${loadBefore}; after: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    'MiB per box (p50)         box procs  supervisor  network  all processes  box cgroup  MemAvailable drop  start p50 ms',
  );
  for (const r of results) {
    const p = (a: number[]) => mib(percentile(a, 50)).padStart(9);
    console.log(
      `${r.label.padEnd(25)} ${p(r.perBoxKib.box)}  ${p(r.perBoxKib.supervisor)}  ${p(r.perBoxKib.network)}  ${p(r.perBoxKib.total).padStart(13)}  ${p(r.perBoxKib.cgroup).padStart(10)}  ${mib(r.memAvailableDropKib).padStart(17)}  ${percentile(r.startMs, 50).toFixed(1).padStart(12)}`,
    );
  }
  const first = results[0]!;
  const perBox = Math.max(first.memAvailableDropKib, percentile(first.perBoxKib.total, 50));
  const processes = detach ? 2 : 3;
  console.log(
    `at this rate the ${mib(avail)} MiB available now hold ~${Math.floor(avail / perBox)} more boxes; ` +
      `pid_max ${pidMax} allows ~${Math.floor(pidMax / processes)} (${processes} host processes per box)`,
  );
}

await main();
