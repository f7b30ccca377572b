/**
 * `sandbox mcp` over stdio driven by the MCP SDK's own `Client` (issue 30 "Tests and measures"): the tools
 * listed with valid schemas; an agent-like session on a `python:slim` box (write a Python file, run it,
 * read its output, stateful code twice, a plot as image content, long output truncated with the full
 * output in a file, a background command with input, progress notifications and cancellation killing the
 * command; a cancelled run_code interrupting the kernel, whose state the next call still has); errors as
 * tool errors (unknown box, a network the operator does not allow, session limits); and the end of the
 * session removing its boxes but not a persisted one, which a later session lists with the session that
 * made it.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { JsRuntime } from '../src/index.ts';
import { call, checkToolSchemas, connectStdio, localMcpArgs, ok, toolError } from './mcp-helpers.ts';
import { cleanupAll, ensureRegistry, REGISTRIES, tempHome } from './runtime-helpers.ts';

const PNG_BASE64_PREFIX = 'iVBORw0KGgo';

describe('sandbox mcp over stdio', () => {
  let home: string;
  let client: Client;
  let box: string;
  const stderr: string[] = [];

  before(async () => {
    ensureRegistry();
    home = tempHome('sandbox-mcp-');
    const config = join(home, 'mcp.json');
    writeFileSync(
      config,
      JSON.stringify({ maxBoxes: 3, maxMemoryMib: 2048, maxOutputBytes: 4096, allowNet: ['example.com'] }),
    );
    ({ client } = await connectStdio(localMcpArgs(home, '--config', config), 'mcp-stdio-test', (text) =>
      stderr.push(text),
    ));
  });

  after(async () => {
    await client?.close().catch(() => {});
    await cleanupAll();
  });

  it('lists every tool with a description and valid input and output schemas', async () => {
    const schemas = await checkToolSchemas(client);
    assert.equal(schemas.has('upload_from_host'), false, 'host transfers are off without hostPaths');
    assert.match(client.getInstructions() ?? '', /create_box/);
  });

  it('creates a code box, writes a Python file, runs it and reads its output', async () => {
    const created = await ok(client, 'create_box', { kind: 'code', persist: false });
    box = created.id;
    assert.equal(created.running, true);
    assert.equal(created.session_box, true);
    assert.equal(created.network?.mode, 'disabled');
    await ok(client, 'write_file', {
      box,
      path: '/work/hello.py',
      content: 'import sys\nprint("hello", sys.stdin.read())\n',
    });
    const run = await ok(client, 'exec', { box, cmd: 'python3', args: ['/work/hello.py'], stdin: 'agent' });
    assert.equal(run.exit_code, 0);
    assert.equal(run.stdout.text, 'hello agent\n');
    assert.equal(run.stdout.truncated, false);
    const listing = await ok(client, 'list_files', { box, path: '/work' });
    assert.deepEqual(
      listing.entries.map((e: { path: string }) => e.path),
      ['/work/hello.py'],
    );
    const read = await ok(client, 'read_file', { box, path: '/work/hello.py' });
    assert.match(read.text, /print\("hello"/);
    const failing = await ok(client, 'exec', { box, cmd: 'sh', args: ['-c', 'echo oops >&2; exit 3'] });
    assert.equal(failing.exit_code, 3);
    assert.equal(failing.stderr.text, 'oops\n');
  });

  it('keeps Python state between run_code calls and returns a plot as image content', async () => {
    const first = await ok(client, 'run_code', { box, code: 'x = 20' });
    assert.equal(first.error, null);
    const second = await ok(client, 'run_code', { box, code: 'x += 22; x' });
    assert.equal(second.text, '42');
    const ctx = await ok(client, 'create_context', { box });
    const other = await ok(client, 'run_code', { box, context: ctx.context, code: "'x' in globals()" });
    assert.equal(other.text, 'False');
    const raised = await ok(client, 'run_code', { box, code: '1/0' });
    assert.equal(raised.error.name, 'ZeroDivisionError');
    const plot = await call(client, 'run_code', {
      box,
      code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()',
    });
    assert.ok(!plot.isError, JSON.stringify(plot.content).slice(0, 400));
    const image = plot.content.find((c) => c.type === 'image');
    assert.ok(image && image.type === 'image');
    assert.equal(image.mimeType, 'image/png');
    assert.ok(image.data.startsWith(PNG_BASE64_PREFIX));
    await ok(client, 'reset_context', { box, context: ctx.context });
    const reset = await ok(client, 'run_code', { box, context: ctx.context, code: "'x' in globals()" });
    assert.equal(reset.text, 'False');
  });

  it('interrupts the kernel when a run_code call is cancelled, keeping its state for the next call', async () => {
    await ok(client, 'run_code', { box, code: 'kept = 41' });
    const controller = new AbortController();
    let looping!: () => void;
    const running = new Promise<void>((resolve) => {
      looping = resolve;
    });
    const pending = client.callTool(
      { name: 'run_code', arguments: { box, code: "print('looping', flush=True)\nwhile True:\n    pass" } },
      undefined,
      // The first output line arrives as a progress notification: the loop runs.
      { signal: controller.signal, onprogress: () => looping(), timeout: 120_000 },
    );
    await running;
    controller.abort();
    await assert.rejects(pending);
    // The kernel was interrupted, not restarted: the next call runs at once, with the state kept.
    const next = await ok(client, 'run_code', { box, code: 'kept + 1' });
    assert.equal(next.error, null);
    assert.equal(next.text, '42');
  });

  it('shortens long output, marks it truncated and leaves the whole of it in a file of the box', async () => {
    const run = await ok(client, 'exec', { box, cmd: 'python3', args: ['-c', 'print("y" * 99999)'] });
    assert.equal(run.stdout.truncated, true);
    assert.equal(run.stdout.total_bytes, 100000);
    assert.ok(Buffer.byteLength(run.stdout.text) < 4096 + 300);
    assert.match(run.stdout.text, /output truncated: 100000 bytes written/);
    const full = await ok(client, 'exec', { box, cmd: 'wc', args: ['-c', run.stdout.full_output_path] });
    assert.match(full.stdout.text, /^100000 /);
    const rest = await ok(client, 'read_file', { box, path: run.stdout.full_output_path, offset: 99990 });
    assert.equal(rest.text, 'yyyyyyyyy\n');
  });

  it('runs a background command fed through send_input and read with read_output', async () => {
    const started = await ok(client, 'start_command', {
      box,
      cmd: 'python3',
      args: ['-u', '-c', 'import sys\nfor l in sys.stdin: print(l.strip().upper())'],
    });
    await ok(client, 'send_input', { command_id: started.command_id, data: 'one\ntwo\n', close_stdin: true });
    const out = await ok(client, 'read_output', { command_id: started.command_id, wait_seconds: 30 });
    assert.equal(out.stdout, 'ONE\nTWO\n');
    assert.equal(out.running, false);
    assert.equal(out.exit_code, 0);
    const sleeper = await ok(client, 'start_command', { box, cmd: 'sleep', args: ['300'] });
    const during = await ok(client, 'read_output', { command_id: sleeper.command_id });
    assert.equal(during.running, true);
    const killed = await ok(client, 'kill_command', { command_id: sleeper.command_id });
    assert.notEqual(killed.exit_code, 0);
  });

  it('reports progress of a long exec and kills the command when the call is cancelled', async () => {
    const notes: number[] = [];
    const slow = await client.callTool(
      { name: 'exec', arguments: { box, cmd: 'sleep', args: ['2.5'] } },
      undefined,
      { onprogress: (p) => notes.push(p.progress), timeout: 60_000 },
    );
    assert.ok(!slow.isError);
    assert.ok(notes.length >= 1, 'at least one progress notification');
    const controller = new AbortController();
    const pending = client.callTool(
      { name: 'exec', arguments: { box, cmd: 'sh', args: ['-c', 'echo $$ > /tmp/pid; exec sleep 300'] } },
      undefined,
      { signal: controller.signal },
    );
    // Cancel once the command runs (its pid file exists).
    for (let i = 0; i < 2000; i++) {
      const probe = await ok(client, 'exec', { box, cmd: 'cat', args: ['/tmp/pid'] });
      if (probe.exit_code === 0 && probe.stdout.text.trim() !== '') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    controller.abort();
    await assert.rejects(pending);
    const pid = (await ok(client, 'exec', { box, cmd: 'cat', args: ['/tmp/pid'] })).stdout.text.trim();
    let alive = true;
    // Up to 15 s: the kill is slow on a loaded machine.
    for (const end = Date.now() + 15_000; alive && Date.now() < end; ) {
      const probe = await ok(client, 'exec', { box, cmd: 'test', args: ['-e', `/proc/${pid}`] });
      alive = probe.exit_code === 0;
      if (alive) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(alive, false, 'the cancelled command was killed');
  });

  it('answers bad calls with tool errors and keeps serving', async () => {
    assert.match(await toolError(client, 'box_info', { box: 'no-such-box' }), /^not_found: /);
    assert.match(
      await toolError(client, 'create_box', { allow_net: ['evil.example'] }),
      /^permission_denied: .*evil\.example.*\(field allow_net\)/,
    );
    assert.match(
      await toolError(client, 'create_box', { memory_mib: 4096 }),
      /^quota_exceeded: .*memory_mib/,
    );
    assert.match(await toolError(client, 'read_file', { box, path: '/nope/missing' }), /^not_found: /);
    assert.match(await toolError(client, 'read_output', { command_id: 'cmd-x' }), /^not_found: /);
    const invalid = await call(client, 'exec', { box, cmd: '' });
    assert.equal(invalid.isError, true);
    const listed = await ok(client, 'list_boxes');
    assert.ok(listed.boxes.some((b: { id: string }) => b.id === box));
  });

  it('removes the boxes of the session when it ends, but not a persisted one, and logs every call', async () => {
    const kept = await ok(client, 'create_box', { image: 'busybox:latest', persist: true, memory_mib: 128 });
    assert.match(kept.mcp_session, /^[0-9a-f]+$/);
    await client.close();
    const runtime = new JsRuntime({ homeDir: home, imageRegistries: REGISTRIES });
    const ids = (await runtime.listInfo()).map((info) => info.id);
    assert.deepEqual(ids, [kept.id]);
    // A later session lists the persisted box with the session that made it.
    const { client: later } = await connectStdio(['--home', home, 'mcp'], 'mcp-stdio-later');
    const listed = (await ok(later, 'list_boxes')).boxes;
    assert.equal(listed.length, 1);
    assert.equal(listed[0].id, kept.id);
    assert.equal(listed[0].session_box, false);
    assert.equal(listed[0].persist, true);
    assert.equal(listed[0].mcp_session, kept.mcp_session);
    // The later session keeps the box's handle; removed by someone else, the box answers not_found.
    assert.equal((await ok(later, 'box_info', { box: kept.id })).mcp_session, kept.mcp_session);
    await runtime.remove(kept.id, true);
    assert.match(await toolError(later, 'exec', { box: kept.id, cmd: 'true' }), /^not_found: /);
    await later.close();
    assert.deepEqual(await runtime.listInfo(), []);
    const log = stderr
      .join('')
      .split('\n')
      .filter((l) => l.startsWith('{"mcp_tool_call"'))
      .map((l) => JSON.parse(l).mcp_tool_call);
    assert.ok(
      log.some((e) => e.tool === 'create_box' && e.outcome === 'ok' && typeof e.durationMs === 'number'),
    );
    assert.ok(
      log.some(
        (e) =>
          e.tool === 'box_info' && e.outcome === 'error' && e.code === 'not_found' && e.box === 'no-such-box',
      ),
    );
    assert.ok(
      log.some((e) => e.tool === 'exec' && e.outcome === 'cancelled'),
      JSON.stringify(log.filter((e) => e.tool === 'exec' && e.outcome !== 'ok')),
    );
    assert.ok(!stderr.join('').includes('hello agent'), 'output is not logged');
  });
});
