/**
 * Code interpreter benchmark: `CodeBox.runCode('1+1')` on a warm context (the default
 * python context, after a first execution), through the local `JsRuntime` (this process drives the box's
 * Jupyter kernel) and through the REST `JsRuntime` talking to `sandbox serve` (a separate process,
 * loopback) in one run, alternating so machine load hits both alike; reports p50/p99 of each, and the
 * same round trip measured inside the box with `jupyter_client` straight to the kernel (the floor: what
 * the kernel itself takes). Goal: ≤ 20 ms p50 on a warm context.
 *
 * Usage (root): `npm run bench:interpreter -w @seed/sandbox` or `node bench/interpreter.ts [runs]`
 * (default 50). Needs the local registry with `python:slim` (started and built here when missing).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CodeBox } from '../src/boxes/code.ts';
import { JsRuntime } from '../src/js-runtime.ts';
import { percentile } from './raw.ts';
import { serve } from './rest-server.ts';

const runs = Number(process.argv[2] ?? 50);

/** Python run in the box: `1+1` on a fresh kernel through `jupyter_client`, `runs` times, ms each. */
const KERNEL_FLOOR = `
import json, time
from jupyter_client.manager import start_new_kernel
km, kc = start_new_kernel(kernel_name='python3')
kc.execute_interactive('1+1', timeout=60, output_hook=lambda m: None)
times = []
for _ in range(${runs}):
    t = time.perf_counter()
    kc.execute_interactive('1+1', timeout=60, output_hook=lambda m: None)
    times.append((time.perf_counter() - t) * 1000)
print(json.dumps(times))
km.shutdown_kernel(now=True)
`;

async function timeRunCode(box: CodeBox): Promise<number> {
  const t0 = performance.now();
  const execution = await box.runCode('1+1');
  if (execution.text !== '2') throw new Error(`runCode('1+1') gave ${JSON.stringify(execution)}`);
  return performance.now() - t0;
}

function report(label: string, samples: number[]): void {
  console.log(
    `${label.padEnd(36)} p50 ${percentile(samples, 50).toFixed(1).padStart(6)} ms   p99 ${percentile(samples, 99).toFixed(1).padStart(6)} ms   (n=${samples.length})`,
  );
}

const registry = spawnSync(
  process.execPath,
  [join(import.meta.dirname, '..', 'scripts', 'registry.ts'), '--quiet', '--images', 'python'],
  { stdio: 'inherit' },
);
if (registry.status !== 0) throw new Error('the local registry could not be started (npm run registry)');

const home = mkdtempSync('/tmp/sandbox-bench-interpreter-');
const registries = [{ host: '127.0.0.1:5000', transport: 'http' as const, search: true }];
const localRuntime = new JsRuntime({ homeDir: home, imageRegistries: registries });
const { url, child } = await serve(home);
const restRuntime = new JsRuntime({ url });
const local = new CodeBox({ runtime: localRuntime });
const rest = new CodeBox({ runtime: restRuntime });
try {
  const t0 = performance.now();
  await local.runCode('1+1');
  console.log(`first runCode (box start, Jupyter Server, kernel): ${(performance.now() - t0).toFixed(0)} ms`);
  await rest.runCode('1+1');
  const localTimes: number[] = [];
  const restTimes: number[] = [];
  for (let i = 0; i < runs; i++) {
    localTimes.push(await timeRunCode(local));
    restTimes.push(await timeRunCode(rest));
  }
  const floor = await local.exec('python3', ['-c', KERNEL_FLOOR]);
  const floorTimes = JSON.parse(floor.stdout.trim().split('\n').at(-1) ?? '[]') as number[];
  report("runCode('1+1') local, warm context", localTimes);
  report("runCode('1+1') REST, warm context", restTimes);
  report('kernel alone (jupyter_client in box)', floorTimes);
  console.log(`load average: ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
} finally {
  await local.stop();
  await rest.stop();
  child.kill('SIGTERM');
  await new Promise((resolve) => child.once('exit', resolve));
  localRuntime.close();
  rmSync(home, { recursive: true, force: true });
}
