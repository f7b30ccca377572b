/**
 * Teardown on creator death: N creator processes (bench/boxes-creators.ts) each create one
 * non-detached busybox box, then all are SIGKILLed at once; the host is scanned every 20 ms and, per
 * box, the time from the SIGKILLs to the first scan that finds nothing of it (no process, mount,
 * cgroup or network namespace; `leftovers`) is recorded ("box gone"), and the time until the OCI
 * runtime has also deleted its state of the dead box ("clean"; runsc takes 0.5-2 s for that after the
 * gVisor sandbox is gone). Prints p50 / p99 / max per kind of box
 * (container tier network on, on with `allowNet`, off; gVisor tier network on), how long the creators
 * took to have their boxes running, and the load average. Goal: every box gone within 1 s.
 *
 * Usage (root): `node --conditions=seed-source bench/boxes-teardown.ts [creators] [gvisorEvery]`
 * (default 24 creators, every 4th on the gVisor tier; `gvisorEvery` 0 for none). Needs the local
 * registry (`npm run registry -w @seed/sandbox`; started here when missing).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { JsRuntime } from '../src/js-runtime.ts';
import { type Created, spawnCreator, waitGone } from './boxes-creators.ts';
import { percentile } from './raw.ts';

const creators = Number(process.argv[2] ?? 24);
const gvisorEvery = Number(process.argv[3] ?? 4);
const IMAGE = 'busybox:latest';
const REGISTRIES = [{ host: '127.0.0.1:5000', transport: 'http' as const, search: true }];
/** How long the bench waits for the host to be clean before it reports what is left, ms. */
const BOUND_MS = 30_000;

/** The kinds of box a creator makes, in turn; every `gvisorEvery`-th creator is a gVisor one. */
const KINDS: { name: string; options: object }[] = [
  { name: 'container net on', options: { network: { mode: 'enabled' } } },
  { name: 'container allowNet', options: { network: { mode: 'enabled', allowNet: ['example.com'] } } },
  { name: 'container net off', options: { network: { mode: 'disabled' } } },
];
const GVISOR = { name: 'gVisor net on', options: { isolation: 'gvisor', network: { mode: 'enabled' } } };

function loadavg(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
}

async function main(): Promise<void> {
  const registry = spawnSync(
    process.execPath,
    [join(import.meta.dirname, '..', 'scripts', 'registry.ts'), '--quiet', '--images', 'busybox'],
    { stdio: 'inherit' },
  );
  if (registry.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
  const home = mkdtempSync('/tmp/sandbox-bench-teardown-');
  try {
    // The image once, before the creators (each would otherwise pull it).
    const runtime = new JsRuntime({ homeDir: home, imageRegistries: REGISTRIES });
    await runtime.images.pull(IMAGE);
    const kinds = Array.from({ length: creators }, (_, i) =>
      gvisorEvery > 0 && i % gvisorEvery === gvisorEvery - 1 ? GVISOR : KINDS[i % KINDS.length]!,
    );
    const loadBefore = loadavg();
    const t0 = performance.now();
    const procs = kinds.map((k) => spawnCreator(home, REGISTRIES, IMAGE, k.options));
    const boxes: Created[] = await Promise.all(procs.map((c) => c.created));
    const upMs = performance.now() - t0;
    const exited = procs.map((c) => new Promise((resolve) => c.proc.once('exit', resolve)));
    const killedAt = performance.now();
    for (const c of procs) c.proc.kill('SIGKILL');
    const { boxGoneMs, cleanMs, left } = await waitGone(boxes, killedAt, BOUND_MS);
    await Promise.all(exited);
    console.log(
      `teardown after creator SIGKILL: ${creators} creators at once (${Math.round(upMs)} ms until all boxes ran), node ${process.version}`,
    );
    console.log(
      `${'ms from SIGKILL'.padEnd(20)}     n   box gone p50    p99    max   clean p50    p99    max`,
    );
    const fmt = (n: number) => n.toFixed(0).padStart(6);
    const stats = (times: (number | undefined)[]) => {
      const done = times.filter((t): t is number => t !== undefined);
      const missing = times.length - done.length;
      return `${fmt(percentile(done, 50))} ${fmt(percentile(done, 99))} ${fmt(Math.max(...done))}${missing > 0 ? ` (${missing} left)` : ''}`;
    };
    for (const name of [...new Set(kinds.map((k) => k.name))]) {
      const mine = (times: (number | undefined)[]) => times.filter((_, i) => kinds[i]!.name === name);
      console.log(
        `${name.padEnd(20)} ${String(mine(boxGoneMs).length).padStart(5)}     ${stats(mine(boxGoneMs))}      ${stats(mine(cleanMs))}`,
      );
    }
    const gone = boxGoneMs.filter((t): t is number => t !== undefined);
    const met = gone.length === boxes.length && Math.max(...gone) <= 1000;
    console.log(
      `all boxes gone: p50 ${percentile(gone, 50).toFixed(0)} ms, p99 ${percentile(gone, 99).toFixed(0)} ms, max ${Math.max(...gone).toFixed(0)} ms; goal every box gone within 1 s: ${met ? 'met' : 'NOT met'}`,
    );
    if (left.length > 0) console.log(`left after ${BOUND_MS} ms:\n  ${left.join('\n  ')}`);
    console.log(`load average: ${loadBefore} before, ${loadavg()} after`);
    await runtime.shutdown();
  } finally {
    try {
      rmSync(home, { recursive: true, force: true });
    } catch (error) {
      console.error(`leaving ${home}: ${(error as Error).message}`);
    }
  }
}

await main();
