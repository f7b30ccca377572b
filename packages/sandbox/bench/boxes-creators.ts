/**
 * Creator processes and a host scan for the teardown-on-creator-death measurements
 * (`bench/boxes-teardown.ts`) and test (`test/teardown-creators.test.ts`): a creator is a Node process
 * that creates one non-detached box through `JsRuntime` and idles; `scanHost` reads the host once
 * (every process's command line and environment, the mount table, the cgroup hierarchies, `/run/netns`)
 * and `leftovers` says what of a box is still there.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readProcStat } from '../src/engine/proc-stat.ts';
import type { JsImageRegistry } from '../src/types.ts';

/** Node's compile cache directory of the creators (`NODE_COMPILE_CACHE`). */
export const CREATORS_COMPILE_CACHE = join(tmpdir(), 'seed-sandbox-creators-compile-cache');

/** A box a creator made: its id and the host pid of its init (gVisor: the sandbox process). */
export interface Created {
  id: string;
  pid: number;
}

/** A creator process and the box it reports once that box runs. */
export interface Creator {
  proc: ChildProcess;
  /** Resolves with the box once created; rejects when the creator exits before. */
  created: Promise<Created>;
}

/**
 * Spawns a Node process (the one running this module, with `--conditions=seed-source` and the
 * creators' compile cache) that creates
 * one non-detached box `{ image, ...options }` on a `JsRuntime` of `homeDir`, prints `{ id, pid }` on
 * a line of its stdout and then idles until it is killed.
 */
export function spawnCreator(
  homeDir: string,
  registries: JsImageRegistry[],
  image: string,
  options: object,
): Creator {
  const runtimeModule = join(import.meta.dirname, '..', 'src', 'js-runtime.ts');
  const source = `
    import { JsRuntime } from ${JSON.stringify(runtimeModule)};
    const runtime = new JsRuntime({ homeDir: ${JSON.stringify(homeDir)}, imageRegistries: ${JSON.stringify(registries)} });
    const box = await runtime.create(${JSON.stringify({ image, ...options })});
    const info = await box.info();
    console.log(JSON.stringify({ id: box.id, pid: info.state.pid }));
    setInterval(() => {}, 1000);`;
  const proc = spawn(process.execPath, ['--conditions=seed-source', '--input-type=module', '-e', source], {
    stdio: ['ignore', 'pipe', 'inherit'],
    // V8's code cache (and the stripped TypeScript) shared by the creators: about half the CPU time
    // and a quarter less memory per creator than compiling the runtime's modules each time.
    env: { ...process.env, NODE_COMPILE_CACHE: CREATORS_COMPILE_CACHE },
  });
  let out = '';
  const created = new Promise<Created>((resolve, reject) => {
    proc.stdout!.on('data', (chunk) => {
      out += chunk;
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (line && out.includes('\n')) resolve(JSON.parse(line) as Created);
    });
    proc.on('exit', (code) => reject(new Error(`creator exited (${code}) before its box ran: ${out}`)));
  });
  return { proc, created };
}

/** One reading of the host: what `leftovers` matches boxes against. */
export interface HostScan {
  /** Live (not zombie) processes other than this one: pid, command line (spaces for NULs), environment. */
  processes: { pid: number; cmdline: string; environ: string[] }[];
  /** Mount points of `/proc/self/mountinfo`, with their whole lines. */
  mountLines: string[];
  /** The cgroup hierarchies under `/sys/fs/cgroup` (each holds `seed-sandbox/<id>` of a gVisor box). */
  cgroupRoots: string[];
}

/** Reads every process, the mount table and the cgroup hierarchies once. */
export function scanHost(): HostScan {
  const processes: HostScan['processes'] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const environ = readFileSync(`/proc/${entry}/environ`, 'utf8');
      if (readProcStat(Number(entry))?.state === 'Z') continue;
      processes.push({
        pid: Number(entry),
        cmdline: cmdline.replaceAll('\0', ' '),
        environ: environ.split('\0'),
      });
    } catch {}
  }
  const mountLines = readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  const cgroupRoots = readdirSync('/sys/fs/cgroup').map((c) => join('/sys/fs/cgroup', c));
  cgroupRoots.push('/sys/fs/cgroup');
  return { processes, mountLines, cgroupRoots };
}

/** One thing of a box still on the host; `housekeeping` for runsc deleting its state of a dead sandbox. */
export interface Leftover {
  what: string;
  housekeeping: boolean;
}

/**
 * What of box `id` (init or sandbox `pid`) `scan` still saw on the host; empty when nothing: its init
 * running, a process whose command line names the id or whose environment has `SB_ID=<id>` (its
 * supervisor, slirp4netns, the gVisor sandbox and gofer), a mount naming the id (root, disk, network
 * namespace file), a cgroup `seed-sandbox/<id>` in any hierarchy, `/run/netns/sbx-<id>`. A process
 * running `… delete --force <id>` (the OCI runtime clearing its state of the dead box) is housekeeping:
 * it is reported, but not as part of the box.
 */
export function leftovers({ id, pid }: Created, scan: HostScan): Leftover[] {
  const left: Leftover[] = [];
  const box = (what: string) => left.push({ what, housekeeping: false });
  const init = readProcStat(pid);
  if (init && init.state !== 'Z') box(`init ${pid} (${init.state})`);
  for (const p of scan.processes) {
    if (!p.cmdline.includes(id) && !p.environ.includes(`SB_ID=${id}`)) continue;
    const what = `process ${p.pid}: ${p.cmdline.slice(0, 160)}`;
    left.push({ what, housekeeping: p.cmdline.includes(` delete --force ${id}`) });
  }
  for (const line of scan.mountLines) if (line.includes(id)) box(`mount ${line.split(' ')[4]}`);
  for (const root of scan.cgroupRoots) {
    const dir = join(root, 'seed-sandbox', id);
    if (existsSync(dir)) box(`cgroup ${dir}`);
  }
  if (existsSync(`/run/netns/sbx-${id}`)) box(`netns /run/netns/sbx-${id}`);
  return left;
}

/** Per box, ms from the SIGKILLs until a scan found it gone; undefined when none did. */
export interface GoneTimes {
  /** Until nothing of the box was left but housekeeping (processes, mounts, cgroups, netns gone). */
  boxGoneMs: (number | undefined)[];
  /** Until nothing at all was left, housekeeping included. */
  cleanMs: (number | undefined)[];
  /** Everything the last scan still found, `<id>: <what>`. */
  left: string[];
}

/**
 * Scans the host every `everyMs` ms until nothing of `boxes` is left, housekeeping included, or
 * `boundMs` ms have passed since `t0` (a `performance.now()` time), and reports when each box was gone.
 */
export async function waitGone(
  boxes: Created[],
  t0: number,
  boundMs: number,
  everyMs = 20,
): Promise<GoneTimes> {
  const boxGoneMs: (number | undefined)[] = boxes.map(() => undefined);
  const cleanMs: (number | undefined)[] = boxes.map(() => undefined);
  let left: string[] = [];
  for (;;) {
    const scan = scanHost();
    const now = performance.now() - t0;
    left = [];
    for (const [i, box] of boxes.entries()) {
      if (cleanMs[i] !== undefined) continue;
      const own = leftovers(box, scan);
      if (boxGoneMs[i] === undefined && own.every((l) => l.housekeeping)) boxGoneMs[i] = now;
      if (own.length === 0) cleanMs[i] = now;
      else left.push(...own.map((l) => `${box.id}: ${l.what}`));
    }
    if (left.length === 0 || now > boundMs) return { boxGoneMs, cleanMs, left };
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
