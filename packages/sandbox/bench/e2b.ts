/**
 * E2B compatibility benchmark (issue 29 "Tests and measures"), against one `sandbox serve` child on
 * loopback: `Sandbox.create('base')` → first `commands.run('true')` with the unmodified `e2b` SDK, and the
 * `commands.run('true')` round trip in a running sandbox, p50/p99, beside the same through our own REST
 * client (`JsRuntime({ url })`: `create` → `exec('true')`, and `exec('true')` in the same box) in the
 * same run; E2B and REST runs alternate so machine load hits both alike. The E2B create is also split
 * into `Sandbox.create` and the first command, and measured again with a warm pool of `base` boxes kept by
 * the server for the caller's tenant (`POST /v1/pools {image: 'base:latest', size: 1}` through the REST
 * client; each create waits until the pool is full again, so every create is served by a fresh pooled box).
 * Last, `runCode('1+1')` of `@e2b/code-interpreter` on the warm default context of a
 * `code-interpreter-v1` sandbox, and the same `1+1` measured inside that sandbox through Jupyter Server's
 * kernel WebSocket and straight to the kernel (`IN_BOX`): what the host's hops add.
 * Goals: create → first command ≤ 150 ms p50; command round trip ≤ 1.5× ours; warm `runCode` ≤ 20 ms p50.
 *
 * Usage (root): `npm run bench:e2b -w @seed/sandbox` or `node bench/e2b.ts [creates] [commands]`
 * (default 10 and 100). Needs the local registry with `base` and `code-interpreter-v1` (`npm run registry -w @seed/sandbox`).
 */

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter';
import { Sandbox } from 'e2b';
import { JsRuntime } from '../src/js-runtime.ts';
import { percentile } from './raw.ts';
import { serve } from './rest-server.ts';

/**
 * Python run inside the `code-interpreter-v1` sandbox after the host's `runCode` loop: `1+1` on the
 * default context's kernel `n` times through Jupyter Server's kernel WebSocket (the server's own path,
 * without the host's hops) and straight to the kernel's ZMQ channels (`jupyter_client.session.Session`
 * signs the messages with the key of the kernel's connection file); prints `{ ws, direct }` in ms.
 */
const IN_BOX = `
import asyncio, glob, json, os, sys, time, uuid
import zmq
from jupyter_client.session import Session
from tornado.websocket import websocket_connect
n = int(sys.argv[1])
runtime = os.path.expanduser('~/.local/share/jupyter/runtime')
server = json.load(open(max(glob.glob(runtime + '/jpserver-*.json'), key=os.path.getmtime)))
connection = min(glob.glob(runtime + '/kernel-*.json'), key=os.path.getmtime)
kernel_id = os.path.basename(connection)[len('kernel-'):-len('.json')]
content = {'code': '1+1', 'silent': False, 'store_history': True, 'user_expressions': {}, 'allow_stdin': False, 'stop_on_error': False}

async def through_server():
    url = 'ws://127.0.0.1:%d/api/kernels/%s/channels?token=%s' % (server['port'], kernel_id, server['token'])
    ws = await websocket_connect(url)
    times = []
    for i in range(n + 3):
        mid = uuid.uuid4().hex
        header = {'msg_id': mid, 'msg_type': 'execute_request', 'username': 'bench', 'session': 'bench', 'date': '', 'version': '5.3'}
        t = time.perf_counter()
        await ws.write_message(json.dumps({'header': header, 'parent_header': {}, 'metadata': {}, 'content': content, 'channel': 'shell', 'buffers': []}))
        reply = idle = False
        while not (reply and idle):
            m = json.loads(await ws.read_message())
            if m['parent_header'].get('msg_id') != mid:
                continue
            reply = reply or m['channel'] == 'shell'
            idle = idle or (m['msg_type'] == 'status' and m['content']['execution_state'] == 'idle')
        if i >= 3:
            times.append((time.perf_counter() - t) * 1000)
    ws.close()
    return times

def direct():
    info = json.load(open(connection))
    session = Session(key=info['key'].encode(), signature_scheme=info['signature_scheme'])
    context = zmq.Context()
    shell = context.socket(zmq.DEALER)
    shell.connect('tcp://%s:%d' % (info['ip'], info['shell_port']))
    iopub = context.socket(zmq.SUB)
    iopub.setsockopt(zmq.SUBSCRIBE, b'')
    iopub.connect('tcp://%s:%d' % (info['ip'], info['iopub_port']))
    time.sleep(0.5)
    poller = zmq.Poller()
    poller.register(shell, zmq.POLLIN)
    poller.register(iopub, zmq.POLLIN)
    times = []
    for i in range(n + 3):
        t = time.perf_counter()
        mid = session.send(shell, 'execute_request', content)['header']['msg_id']
        reply = idle = False
        while not (reply and idle):
            for socket, _ in poller.poll(10000):
                _, m = session.recv(socket, mode=zmq.NOBLOCK)
                if m is None or m['parent_header'].get('msg_id') != mid:
                    continue
                reply = reply or socket is shell
                idle = idle or (m['msg_type'] == 'status' and m['content']['execution_state'] == 'idle')
        if i >= 3:
            times.append((time.perf_counter() - t) * 1000)
    context.destroy(linger=0)
    return times

print(json.dumps({'ws': asyncio.run(through_server()), 'direct': direct()}))
`;

const creates = Number(process.argv[2] ?? 10);
const commands = Number(process.argv[3] ?? 100);
const API_KEY = `e2b_${'5eed'.repeat(10)}`;

function row(name: string, values: number[]): string {
  return `| ${name} | ${percentile(values, 50).toFixed(1)} | ${percentile(values, 99).toFixed(1)} |`;
}

async function main(): Promise<void> {
  const registry = spawnSync(
    process.execPath,
    [join(import.meta.dirname, '..', 'scripts', 'registry.ts'), '--quiet', '--images', 'base,python'],
    { stdio: 'inherit' },
  );
  if (registry.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
  const home = mkdtempSync('/tmp/sandbox-bench-e2b-');
  process.env.SANDBOX_API_KEY = API_KEY;
  const { url, child } = await serve(home);
  const opts = { apiKey: API_KEY, apiUrl: url, sandboxUrl: url };
  const rest = new JsRuntime({ url, apiKey: API_KEY });
  try {
    const e2bCreate: number[] = [];
    const e2bCreateOnly: number[] = [];
    const e2bFirstRun: number[] = [];
    const restCreate: number[] = [];
    const pooledCreate: number[] = [];
    const pooledCreateOnly: number[] = [];
    // Warm-up: the image is pulled and unpacked once, connections opened.
    await (await Sandbox.create('base', opts)).kill();
    await rest.remove((await rest.create({ image: 'base:latest' })).id, true);
    for (let i = 0; i < creates; i++) {
      let t0 = performance.now();
      const sbx = await Sandbox.create('base', opts);
      const t1 = performance.now();
      await sbx.commands.run('true');
      const t2 = performance.now();
      e2bCreate.push(t2 - t0);
      e2bCreateOnly.push(t1 - t0);
      e2bFirstRun.push(t2 - t1);
      await sbx.kill();
      t0 = performance.now();
      const box = await rest.create({ image: 'base:latest' });
      await (await box.exec('true')).wait();
      restCreate.push(performance.now() - t0);
      await rest.remove(box.id, true);
    }
    const pool = rest.pool({ image: 'base:latest', size: 1 });
    for (let i = 0; i < creates; i++) {
      await pool.filled();
      const t0 = performance.now();
      const sbx = await Sandbox.create('base', opts);
      const t1 = performance.now();
      await sbx.commands.run('true');
      pooledCreate.push(performance.now() - t0);
      pooledCreateOnly.push(t1 - t0);
      await sbx.kill();
    }
    await pool.close();
    const sbx = await Sandbox.create('base', opts);
    const box = await rest.create({ image: 'base:latest' });
    const e2bRun: number[] = [];
    const restRun: number[] = [];
    for (let i = 0; i < 10; i++) {
      await sbx.commands.run('true');
      await (await box.exec('true')).wait();
    }
    for (let i = 0; i < commands; i++) {
      let t0 = performance.now();
      await sbx.commands.run('true');
      e2bRun.push(performance.now() - t0);
      t0 = performance.now();
      await (await box.exec('true')).wait();
      restRun.push(performance.now() - t0);
    }
    await sbx.kill();
    await rest.remove(box.id, true);
    const code = await CodeSandbox.create('code-interpreter-v1', { ...opts, requestTimeoutMs: 300_000 });
    const runCode: number[] = [];
    await code.runCode('1+1', { timeoutMs: 300_000 });
    for (let i = 0; i < 5; i++) await code.runCode('1+1');
    for (let i = 0; i < commands; i++) {
      const t0 = performance.now();
      await code.runCode('1+1');
      runCode.push(performance.now() - t0);
    }
    await code.files.write('/tmp/bench-in-box.py', IN_BOX);
    const inBox = JSON.parse(
      (await code.commands.run(`python3 /tmp/bench-in-box.py ${commands}`, { timeoutMs: 300_000 })).stdout,
    ) as { ws: number[]; direct: number[] };
    await code.kill();
    const load = readFileSync('/proc/loadavg', 'utf8').trim();
    console.log(
      `\nE2B SDK vs our REST client, ${creates} creates and ${commands} commands, alternating (ms):\n`,
    );
    console.log('| case | p50 | p99 |\n|---|---|---|');
    console.log(row("create('base') → first commands.run('true'), e2b SDK", e2bCreate));
    console.log(row('  of which Sandbox.create', e2bCreateOnly));
    console.log(row("  of which the first commands.run('true')", e2bFirstRun));
    console.log(row("create → exec('true'), REST client", restCreate));
    console.log(row("create('base') → first commands.run('true'), warm pool of base (size 1)", pooledCreate));
    console.log(row('  of which Sandbox.create', pooledCreateOnly));
    console.log(row("commands.run('true') round trip, e2b SDK", e2bRun));
    console.log(row("exec('true') round trip, REST client", restRun));
    console.log(row("runCode('1+1') on a warm context, @e2b/code-interpreter", runCode));
    console.log(row("  in the box: '1+1' through Jupyter Server's kernel WebSocket", inBox.ws));
    console.log(row("  in the box: '1+1' straight to the kernel (ZMQ)", inBox.direct));
    const ratio = percentile(e2bRun, 50) / percentile(restRun, 50);
    const best = percentile(pooledCreate, 50);
    console.log(
      `\ncreate → first command p50 ${percentile(e2bCreate, 50).toFixed(1)} ms, ${best.toFixed(1)} ms from a warm pool (goal ≤ 150: ${best <= 150 ? 'met' : 'NOT met'}); ` +
        `command round trip ${ratio.toFixed(2)}× ours (goal ≤ 1.5: ${ratio <= 1.5 ? 'met' : 'NOT met'}); ` +
        `warm runCode p50 ${percentile(runCode, 50).toFixed(1)} ms (goal ≤ 20: ${percentile(runCode, 50) <= 20 ? 'met' : 'NOT met'})`,
    );
    console.log(`load average: ${load}`);
  } finally {
    rest.close();
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    const cleanup = new JsRuntime({ homeDir: home });
    for (const info of await cleanup.listInfo()) await cleanup.remove(info.id, true);
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
