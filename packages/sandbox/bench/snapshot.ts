/**
 * Snapshot benchmark: with a warm image (`busybox:latest` from the local registry), for a box with 500 MiB
 * written (one file of random bytes) and for a box with 10 000 small files (4 KiB each):
 *  - `box.snapshot.create()` p50/p99 (the box keeps running; frozen while it is taken). The first snapshot
 *    right after the write also pays the kernel's write-back of the fresh data: reported on its own;
 *  - `box.snapshot.restore()` p50/p99 (the box restarts on the saved layer and answers an exec);
 *  - `runtime.cloneBox()` → first exec result p50;
 *  - `box.export()` and `runtime.importBox()` (into another homeDir) throughput, MB/s of archive;
 * and the peer in the same run: a plain `cp -a` of the box's upper dir (what a design without
 * copy-on-write pays for a snapshot), with the ratio, and the load average.
 *
 * Usage (root): `npm run bench:snapshot -w @seed/sandbox` or `node bench/snapshot.ts [runs]` (default 10).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBox } from '../src/runtime/box.ts';
import { percentile } from './raw.ts';

const runs = Number(process.argv[2] ?? 10);
const IMAGE = 'busybox:latest';
const REGISTRIES = [{ host: '127.0.0.1:5000', transport: 'http' as const, search: true }];

function ensureRegistry(): void {
  const script = join(import.meta.dirname, '..', 'scripts', 'registry.ts');
  const result = spawnSync(process.execPath, [script, '--quiet', '--images', 'busybox'], {
    stdio: 'inherit',
  });
  if (result.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
}

async function sh(box: JsBox, script: string): Promise<string> {
  const execution = await box.exec('sh', ['-c', script]);
  const out: string[] = [];
  const stdout = await execution.stdout();
  const stderr = await execution.stderr();
  const drain = async (s: typeof stdout, into: string[]) => {
    for (let l = await s.next(); l !== null; l = await s.next()) into.push(l);
  };
  const err: string[] = [];
  await Promise.all([drain(stdout, out), drain(stderr, err)]);
  const { exitCode } = await execution.wait();
  if (exitCode !== 0) throw new Error(`${script}: exit ${exitCode}: ${err.join('\n')}`);
  return out.join('\n');
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

const f1 = (n: number) => n.toFixed(1).padStart(8);
const stats = (xs: number[]) => `${f1(percentile(xs, 50))} ${f1(percentile(xs, 99))}`;

interface CaseResult {
  name: string;
  firstCreateMs: number;
  createMs: number[];
  restoreMs: number[];
  cloneMs: number[];
  cpMs: number[];
  exportMBs: number;
  importMBs: number;
  archiveBytes: number;
}

async function runCase(
  runtime: JsRuntime,
  other: JsRuntime,
  name: string,
  write: string,
  scratch: string,
): Promise<CaseResult> {
  const box = await runtime.create({ image: IMAGE, network: { mode: 'disabled' } }, `bench-snap-${name}`);
  try {
    await sh(box, write);
    const firstCreateMs = await timed(() => box.snapshot.create('first'));
    const createMs: number[] = [];
    for (let i = 0; i < runs; i++) {
      await sh(box, `echo ${i} > /round`);
      createMs.push(await timed(() => box.snapshot.create(`s${i}`)));
    }
    const restoreMs: number[] = [];
    for (let i = 0; i < runs; i++) {
      // Restored and answering: the box has restarted on the saved layer.
      restoreMs.push(
        await timed(async () => {
          await box.snapshot.restore(`s${i}`);
          await sh(box, 'true');
        }),
      );
    }
    if ((await sh(box, 'cat /round')).trim() !== String(runs - 1)) throw new Error('restore lost the layer');
    const upper = join(runtime.homeDir, 'boxes', box.id, 'disk', 'layer', 'upper');
    const cpMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const target = join(scratch, `cp-${name}-${i}`);
      cpMs.push(
        await timed(async () => {
          const r = spawnSync('cp', ['-a', upper, target]);
          if (r.status !== 0) throw new Error(`cp -a failed: ${r.stderr}`);
          spawnSync('sync', ['-f', target]);
        }),
      );
      rmSync(target, { recursive: true, force: true });
    }
    const cloneMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      let clone: JsBox | null = null;
      cloneMs.push(
        await timed(async () => {
          clone = await runtime.cloneBox(box.id, { snapshot: 'first' });
          await sh(clone, 'true');
        }),
      );
      if (clone) await runtime.remove((clone as JsBox).id, true);
    }
    const archive = join(scratch, `${name}.tar`);
    const exportMs = await timed(() => box.export(archive));
    const archiveBytes = statSync(archive).size;
    let imported: JsBox | null = null;
    const importMs = await timed(async () => {
      imported = await other.importBox(archive);
      await sh(imported, 'true');
    });
    if (imported) await other.remove((imported as JsBox).id, true);
    rmSync(archive, { force: true });
    const mbs = (ms: number) => archiveBytes / 1e6 / (ms / 1000);
    return {
      name,
      firstCreateMs,
      createMs,
      restoreMs,
      cloneMs,
      cpMs,
      exportMBs: mbs(exportMs),
      importMBs: mbs(importMs),
      archiveBytes,
    };
  } finally {
    await runtime.remove(box.id, true);
  }
}

ensureRegistry();
const scratch = mkdtempSync('/tmp/sandbox-bench-snap-');
const runtime = new JsRuntime({ homeDir: join(scratch, 'home'), imageRegistries: REGISTRIES });
const other = new JsRuntime({ homeDir: join(scratch, 'other') });
const before = loadavg();
try {
  await (await runtime.create({ image: IMAGE, network: { mode: 'disabled' } })).stop(); // warm image and disk template
  const cases = [
    await runCase(
      runtime,
      other,
      '500MiB',
      'dd if=/dev/urandom of=/data bs=1M count=500 2>/dev/null',
      scratch,
    ),
    await runCase(
      runtime,
      other,
      '10k-files',
      'mkdir /many && cd /many && i=0; while [ $i -lt 100 ]; do mkdir d$i; j=0; while [ $j -lt 100 ]; do head -c 4096 /dev/urandom > d$i/f$j; j=$((j+1)); done; i=$((i+1)); done',
      scratch,
    ),
  ];
  console.log(`snapshot benchmark, ${runs} runs per case (p50 p99, ms)`);
  for (const c of cases) {
    console.log(`\n${c.name} written:`);
    console.log(
      `  snapshot.create           ${stats(c.createMs)}   (first, right after the write: ${c.firstCreateMs.toFixed(1)})`,
    );
    console.log(`  snapshot.restore → exec   ${stats(c.restoreMs)}`);
    console.log(`  cp -a of the upper (peer) ${stats(c.cpMs)}`);
    console.log(`  cloneBox → first exec     ${stats(c.cloneMs)}`);
    console.log(
      `  export ${c.exportMBs.toFixed(0)} MB/s, import → exec ${c.importMBs.toFixed(0)} MB/s (archive ${(c.archiveBytes / 1e6).toFixed(1)} MB)`,
    );
    const cp = percentile(c.cpMs, 50);
    console.log(
      `  ratios: cp -a / snapshot.create p50 ${(cp / percentile(c.createMs, 50)).toFixed(1)}×, cp -a / restore p50 ${(cp / percentile(c.restoreMs, 50)).toFixed(1)}×`,
    );
    console.log(
      `  goals: create p50 ≤ 50 ms ${percentile(c.createMs, 50) <= 50 ? 'met' : 'NOT met'}; restore p50 ≤ 100 ms ${percentile(c.restoreMs, 50) <= 100 ? 'met' : 'NOT met'}`,
    );
  }
} finally {
  for (const r of [runtime, other])
    for (const info of await r.listInfo()) await r.remove(info.id, true).catch(() => {});
  rmSync(scratch, { recursive: true, force: true });
  const after = loadavg();
  console.log(
    `\nload average: ${before.map((x) => x.toFixed(2)).join(' ')} before, ${after.map((x) => x.toFixed(2)).join(' ')} after`,
  );
}
