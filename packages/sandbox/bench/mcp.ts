/**
 * MCP benchmark (issue 30 "Tests and measures"): the overhead of `exec` through `sandbox mcp` over stdio
 * (the SDK `Client` → the server process → the box) over the same command run by a direct SDK call
 * (`box.exec('true')` then `wait()`, on a runtime of the same home in this process), on one busybox box,
 * alternating the two so machine load hits both alike. Reports p50/p99 of each, the p50 difference and
 * the median of the paired differences; a third case runs the same server in this process over the SDK's
 * in-memory transport (the protocol and tool layers without the process hop).
 * `MCP_BENCH_PROF_DIR=<dir>` runs the server with `--cpu-prof`.
 * Goal: ≤ 2 ms p50 of overhead over stdio.
 *
 * Usage (root): `npm run bench:mcp -w @seed/sandbox` or `node bench/mcp.ts [runs]` (default 100). Needs
 * the local registry (started here when missing).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { JsRuntime } from '../src/js-runtime.ts';
import { createSandboxMcp, runtimeProvider } from '../src/mcp/server.ts';
import { percentile } from './raw.ts';

const runs = Number(process.argv[2] ?? 100);
const packageDir = join(import.meta.dirname, '..');

const registry = spawnSync(process.execPath, [join(packageDir, 'scripts', 'registry.ts'), '--quiet'], {
  stdio: 'inherit',
});
if (registry.status !== 0) throw new Error('the local registry could not be started (npm run registry)');

console.log(`load average at the start: ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
const home = mkdtempSync('/tmp/sandbox-bench-mcp-');
const transport = new StdioClientTransport({
  command: process.execPath,
  args: [
    '--conditions=seed-source',
    ...(process.env.MCP_BENCH_PROF_DIR
      ? ['--cpu-prof', `--cpu-prof-dir=${process.env.MCP_BENCH_PROF_DIR}`]
      : []),
    join(packageDir, 'bin', 'sandbox.ts'),
    '--home',
    home,
    '--registry',
    'http://127.0.0.1:5000',
    'mcp',
  ],
  // The call log goes to stderr, which agents' clients read: a pipe drained here, as they do.
  stderr: 'pipe',
  env: { ...process.env, SANDBOX_URL: '' } as Record<string, string>,
});
transport.stderr?.on('data', () => {});
const client = new Client({ name: 'bench-mcp', version: '1.0.0' });
await client.connect(transport);

function report(label: string, samples: number[]): void {
  console.log(
    `${label.padEnd(28)} p50 ${percentile(samples, 50).toFixed(2).padStart(7)} ms   p99 ${percentile(samples, 99).toFixed(2).padStart(7)} ms   (n=${samples.length})`,
  );
}

try {
  const created = await client.callTool({
    name: 'create_box',
    arguments: { image: 'busybox:latest', memory_mib: 128 },
  });
  if (created.isError) throw new Error(JSON.stringify(created.content));
  const id = (created.structuredContent as { id: string }).id;
  const runtime = new JsRuntime({ homeDir: home });
  const box = await runtime.get(id);
  if (!box) throw new Error('the box made through MCP is not visible to the direct runtime');

  const direct = async () => {
    const t0 = performance.now();
    const execution = await box.exec('true');
    const { exitCode } = await execution.wait();
    if (exitCode !== 0) throw new Error(`direct exec exited ${exitCode}`);
    return performance.now() - t0;
  };
  const viaMcp = async () => {
    const t0 = performance.now();
    const result = await client.callTool({ name: 'exec', arguments: { box: id, cmd: 'true' } });
    const exit = (result.structuredContent as { exit_code?: number } | undefined)?.exit_code;
    if (result.isError || exit !== 0) throw new Error(`MCP exec failed: ${JSON.stringify(result.content)}`);
    return performance.now() - t0;
  };
  // The same server in this process over the SDK's in-memory transport: the protocol and tool layers
  // without the process hop.
  const local = createSandboxMcp(runtimeProvider(runtime), {}, () => {});
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await local.server.connect(serverSide);
  const inProcess = new Client({ name: 'bench-mcp-in-process', version: '1.0.0' });
  await inProcess.connect(clientSide);
  const viaMemory = async () => {
    const t0 = performance.now();
    const result = await inProcess.callTool({ name: 'exec', arguments: { box: id, cmd: 'true' } });
    if (result.isError) throw new Error(`MCP exec failed: ${JSON.stringify(result.content)}`);
    return performance.now() - t0;
  };
  for (let i = 0; i < 5; i++) {
    await direct();
    await viaMcp();
    await viaMemory();
  }
  const d: number[] = [];
  const m: number[] = [];
  const mem: number[] = [];
  for (let i = 0; i < runs; i++) {
    d.push(await direct());
    m.push(await viaMcp());
    mem.push(await viaMemory());
  }
  await inProcess.close();
  report('exec true, direct SDK call', d);
  report('exec true, MCP over stdio', m);
  report('exec true, MCP in process', mem);
  console.log(`MCP in-process overhead p50: ${(percentile(mem, 50) - percentile(d, 50)).toFixed(2)} ms`);
  console.log(`MCP overhead p50: ${(percentile(m, 50) - percentile(d, 50)).toFixed(2)} ms (goal <= 2 ms)`);
  // Each MCP call runs right after its direct twin: the median of the pairs' differences is less
  // sensitive to load that shifts between the two runs.
  const pairs = m.map((v, i) => v - d[i]!);
  console.log(`MCP overhead, median of paired differences: ${percentile(pairs, 50).toFixed(2)} ms`);
  console.log(`load average at the end: ${readFileSync('/proc/loadavg', 'utf8').trim()}`);
  runtime.close();
} finally {
  await client.close();
  rmSync(home, { recursive: true, force: true });
}
