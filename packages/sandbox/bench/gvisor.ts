/**
 * The gVisor isolation tier against raw runsc and raw crun, in one run (issue "A gVisor isolation
 * tier", Bench): create → first exec result (fresh box: overlay mount, `run --detach`, `exec true`
 * until it exited and its output pipes closed) and the `exec true` round trip in one running box.
 *
 * - raw crun: `RawContainers` of raw.ts (the engine's config.json, crun driven directly);
 * - raw runsc: the gVisor config (`gvisorOciConfig`) run by `runsc --platform=<p> --network=host`
 *   directly, with the same overlay mount, no engine;
 * - gVisor tier: `TieredEngine.start` with `isolation: 'gvisor'` and its `exec` (supervisor,
 *   bookkeeping, `lo` up, stdio plumbing).
 * Samples are interleaved one by one (crun, runsc, tier) so that load from other processes hits all
 * three alike. Root only; busybox rootfs.
 *
 *   node bench/gvisor.ts [runs=20]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findExecutable } from '../src/engine/engine.ts';
import { gvisorOciConfig } from '../src/engine/gvisor.ts';
import { chooseGVisorPlatform } from '../src/engine/gvisor-platform.ts';
import { createTieredEngine } from '../src/engine/gvisor-tiers.ts';
import { makeBusyboxRootfs } from '../src/engine/index.ts';
import type { EngineBoxSpec } from '../src/engine/types.ts';
import { percentile, RawContainers } from './raw.ts';

function run(file: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${file} ${args.join(' ')} exited ${code}`)),
    );
  });
}

function spec(id: string, boxDir: string, layerDirs: string[]): EngineBoxSpec {
  return {
    id,
    hostname: id,
    layerDirs,
    boxDir,
    env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'],
    workingDir: '/',
    cpus: 1,
    memoryMib: 512,
    pidsLimit: 1024,
    mounts: [],
    capabilities: { add: [], drop: [] },
    network: { mode: 'disabled', allowNet: [] },
    detach: true,
    isolation: 'gvisor',
  };
}

/**
 * runsc driven directly with the tier's config (no engine), as host root; `bench/boxes.ts` uses it too.
 * `network` is runsc's `--network`: `host` (the Sentry in the host's user and network namespaces) or
 * `none` (the flag the tier uses for a box without a network: the Sentry in a network namespace and a
 * `nobody` user namespace of runsc's own).
 */
export class RawRunsc {
  readonly #rt: string[];
  readonly #work: string;
  readonly #layerDirs: string[];
  readonly #network: string;
  #seq = 0;

  constructor(
    runsc: string,
    platform: string,
    work: string,
    layerDirs: string[],
    network: 'host' | 'none' = 'host',
  ) {
    this.#work = work;
    this.#layerDirs = layerDirs;
    this.#network = network;
    this.#rt = [runsc, '--root', join(work, 'state'), `--platform=${platform}`, `--network=${network}`];
  }

  async create(): Promise<string> {
    // Unique per instance too: the cgroup path is named after the id.
    const id = `rawgv-${this.#network}-${process.pid}-${this.#seq++}`;
    const dir = join(this.#work, id);
    for (const d of ['upper', 'work', 'rootfs', 'bundle']) mkdirSync(join(dir, d), { recursive: true });
    const config = gvisorOciConfig(spec(id, dir, this.#layerDirs), {
      rootfs: join(dir, 'rootfs'),
      init: '/usr/bin/catatonit',
      initArgs: ['-P'],
      cgroupsPath: `/seed-sandbox-raw/${id}`,
    });
    writeFileSync(join(dir, 'bundle', 'config.json'), JSON.stringify(config));
    const lower = [...this.#layerDirs].reverse().join(':');
    await run('mount', [
      '-t',
      'overlay',
      'overlay',
      '-o',
      `lowerdir=${lower},upperdir=${dir}/upper,workdir=${dir}/work`,
      `${dir}/rootfs`,
    ]);
    await run(this.#rt[0] as string, [
      ...this.#rt.slice(1),
      'run',
      '--detach',
      '--bundle',
      join(dir, 'bundle'),
      id,
    ]);
    return id;
  }

  execTrue(id: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.#rt[0] as string, [...this.#rt.slice(1), 'exec', id, 'true'], {
        stdio: 'pipe',
      });
      child.stdout.resume();
      child.stderr.resume();
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`exec exited ${code}`))));
    });
  }

  async remove(id: string): Promise<void> {
    await run(this.#rt[0] as string, [...this.#rt.slice(1), 'delete', '--force', id]).catch(() => {});
    await run('umount', [join(this.#work, id, 'rootfs')]).catch(() => {});
    rmSync(join(this.#work, id), { recursive: true, force: true });
  }
}

/** Samples of one contender, ms. */
interface Samples {
  create: number[];
  exec: number[];
}

if (import.meta.main) {
  const runs = Number(process.argv[2] ?? 20);
  const runsc = findExecutable('runsc');
  if (!runsc) throw new Error('runsc is not installed (npm run test:setup -w @seed/sandbox)');
  const work = mkdtempSync(join(tmpdir(), 'gvisor-bench-'));
  const layerDirs = [makeBusyboxRootfs(join(work, 'layer0'))];
  const stateRoot = join(work, 'engine');
  mkdirSync(stateRoot, { recursive: true });
  const platform = await chooseGVisorPlatform(runsc, stateRoot);
  const engine = await createTieredEngine({ stateRoot, gvisorPlatform: platform.platform });
  const crun = new RawContainers('crun', layerDirs, join(work, 'crun'));
  mkdirSync(join(work, 'runsc'), { recursive: true });
  const raw = new RawRunsc(runsc, platform.platform, join(work, 'runsc'), layerDirs);
  const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const s: Record<'crun' | 'runsc' | 'tier', Samples> = {
    crun: { create: [], exec: [] },
    runsc: { create: [], exec: [] },
    tier: { create: [], exec: [] },
  };
  const tierExecTrue = async (id: string) => {
    const p = await engine.exec(id, { cmd: 'true', args: [], env: [] });
    const closed = Promise.all([once(p.stdout, 'end'), once(p.stderr, 'end')]);
    p.stdout.resume();
    p.stderr.resume();
    if ((await p.exited) !== 0) throw new Error('exec failed');
    await closed;
  };
  const loadBefore = load();
  console.log(
    `gVisor platform: ${platform.platform} (${platform.reason}); ${runs} runs each; load ${loadBefore}`,
  );
  const tierBoxes: EngineBoxSpec[] = [];
  try {
    let lastCrun: Awaited<ReturnType<RawContainers['create']>> | undefined;
    let lastRunsc: string | undefined;
    for (let i = 0; i < runs; i++) {
      let t0 = performance.now();
      const c = await crun.create();
      await crun.execTrue(c);
      s.crun.create.push(performance.now() - t0);
      if (lastCrun) await crun.remove(lastCrun);
      lastCrun = c;

      t0 = performance.now();
      const r = await raw.create();
      await raw.execTrue(r);
      s.runsc.create.push(performance.now() - t0);
      if (lastRunsc) await raw.remove(lastRunsc);
      lastRunsc = r;

      const b = spec(`tier-${process.pid}-${i}`, join(work, 'boxes', String(i)), layerDirs);
      mkdirSync(b.boxDir, { recursive: true });
      t0 = performance.now();
      await engine.start(b);
      await tierExecTrue(b.id);
      s.tier.create.push(performance.now() - t0);
      tierBoxes.push(b);
      if (tierBoxes.length > 1) {
        const old = tierBoxes.shift() as EngineBoxSpec;
        await engine.remove(old.id, old.boxDir);
      }
    }
    for (let i = 0; i < runs; i++) {
      let t0 = performance.now();
      await crun.execTrue(lastCrun!);
      s.crun.exec.push(performance.now() - t0);
      t0 = performance.now();
      await raw.execTrue(lastRunsc!);
      s.runsc.exec.push(performance.now() - t0);
      t0 = performance.now();
      await tierExecTrue(tierBoxes[0]!.id);
      s.tier.exec.push(performance.now() - t0);
    }
    if (lastRunsc) await raw.remove(lastRunsc);
  } finally {
    for (const b of tierBoxes) await engine.remove(b.id, b.boxDir).catch(() => {});
    await crun.close();
    rmSync(work, { recursive: true, force: true });
  }
  const p50 = (xs: number[]) => percentile(xs, 50);
  const fmt = (xs: number[]) =>
    `p50 ${p50(xs).toFixed(1).padStart(6)} ms  p99 ${percentile(xs, 99).toFixed(1).padStart(6)} ms`;
  for (const [name, x] of [
    ['raw crun   ', s.crun],
    ['raw runsc  ', s.runsc],
    ['gVisor tier', s.tier],
  ] as const) {
    console.log(`${name}  create→exec ${fmt(x.create)} | exec ${fmt(x.exec)}`);
  }
  const ratio = (a: number[], b: number[]) => (p50(a) / p50(b)).toFixed(2);
  console.log(
    `p50 ratios: tier/raw runsc create→exec ${ratio(s.tier.create, s.runsc.create)}×, exec ${ratio(s.tier.exec, s.runsc.exec)}×; ` +
      `tier/raw crun create→exec ${ratio(s.tier.create, s.crun.create)}×, exec ${ratio(s.tier.exec, s.crun.exec)}×; ` +
      `raw runsc/raw crun create→exec ${ratio(s.runsc.create, s.crun.create)}×, exec ${ratio(s.runsc.exec, s.crun.exec)}×`,
  );
  console.log(`goal (this VM): tier create→exec ≤ 300 ms, exec ≤ 30 ms; load ${loadBefore} → ${load()}`);
}
