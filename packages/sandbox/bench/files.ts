/**
 * Files benchmark: `files.read` and `files.write` of a 1 KiB file against the `exec cat` round trip that
 * they replace (`exec('cat', [path])` → stdout drained → exit code), in one running busybox box, on the
 * local `JsRuntime` and on the REST `JsRuntime` talking to `sandbox serve` (a separate process,
 * loopback). The four operations rotate within each round so that machine load hits them alike.
 * Reports p50/p99 per operation and runtime and the ratio of each p50 to the `exec cat` p50 of the same
 * runtime. Goal: read and write ≤ 0.5 × `exec cat` at p50.
 *
 * Usage (root): `node bench/files.ts [runs]` (default 200). Needs the local registry (started here).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBox } from '../src/runtime/box.ts';
import { percentile } from './raw.ts';
import { ensureRegistry, serve } from './rest-server.ts';

const runs = Number(process.argv[2] ?? 200);
const PAYLOAD = randomBytes(512).toString('hex'); // 1 KiB of text

async function execCat(box: JsBox): Promise<void> {
  const execution = await box.exec('cat', ['/bench/file']);
  const stdout = await execution.stdout();
  let text = '';
  for (let line = await stdout.next(); line !== null; line = await stdout.next()) text += line;
  const { exitCode } = await execution.wait();
  if (exitCode !== 0 || text !== PAYLOAD) throw new Error(`exec cat failed (${exitCode})`);
}

type Op = 'exec cat' | 'files.read' | 'files.write';
const OPS: Record<Op, (box: JsBox) => Promise<void>> = {
  'exec cat': execCat,
  'files.read': async (box) => {
    if ((await box.files.read('/bench/file')) !== PAYLOAD) throw new Error('files.read returned other bytes');
  },
  'files.write': async (box) => {
    await box.files.write('/bench/file', PAYLOAD);
  },
};

async function measure(boxes: Record<string, JsBox>): Promise<Map<string, number[]>> {
  const samples = new Map<string, number[]>();
  const names = Object.keys(OPS) as Op[];
  const kinds = Object.keys(boxes);
  for (const [kind, box] of Object.entries(boxes)) {
    await box.files.write('/bench/file', PAYLOAD);
    for (const op of names) for (let i = 0; i < 10; i++) await OPS[op](box); // warm-up
    for (const op of names) samples.set(`${kind} ${op}`, []);
  }
  for (let round = 0; round < runs; round++) {
    for (let k = 0; k < kinds.length; k++) {
      const kind = kinds[(round + k) % kinds.length]!;
      for (let j = 0; j < names.length; j++) {
        const op = names[(round + j) % names.length]!;
        const t0 = performance.now();
        await OPS[op](boxes[kind]!);
        samples.get(`${kind} ${op}`)!.push(performance.now() - t0);
      }
    }
  }
  return samples;
}

ensureRegistry();
const home = mkdtempSync('/tmp/sandbox-bench-files-');
const server = await serve(home);
const local = new JsRuntime({
  homeDir: home,
  imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
});
const remote = new JsRuntime({ url: server.url });
let localBox: JsBox | null = null;
let restBox: JsBox | null = null;
try {
  localBox = await local.create(
    { image: 'busybox:latest', network: { mode: 'disabled' } },
    'bench-files-local',
  );
  restBox = await remote.create(
    { image: 'busybox:latest', network: { mode: 'disabled' } },
    'bench-files-rest',
  );
  const load = loadavg()[0]!.toFixed(2);
  const samples = await measure({ local: localBox!, rest: restBox! });
  console.log(`files bench: ${runs} rounds, 1 KiB file, load average ${load} → ${loadavg()[0]!.toFixed(2)}`);
  console.log('| runtime | operation | p50 ms | p99 ms | p50 / exec cat p50 |');
  console.log('|---|---|---|---|---|');
  for (const kind of ['local', 'rest']) {
    const base = percentile(samples.get(`${kind} exec cat`)!, 50);
    for (const op of Object.keys(OPS)) {
      const values = samples.get(`${kind} ${op}`)!;
      const p50 = percentile(values, 50);
      console.log(
        `| ${kind} | ${op} | ${p50.toFixed(2)} | ${percentile(values, 99).toFixed(2)} | ${(p50 / base).toFixed(2)} |`,
      );
    }
  }
} finally {
  await local.remove('bench-files-local', true).catch(() => {});
  await remote.remove('bench-files-rest', true).catch(() => {});
  remote.close();
  server.child.kill('SIGTERM');
  await new Promise((resolve) => server.child.once('exit', resolve));
  rmSync(home, { recursive: true, force: true });
}
