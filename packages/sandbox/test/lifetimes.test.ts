/**
 * Box lifetimes (issue 18), enforced by the reaper process of the homeDir: `timeoutMs`/`onTimeout` and
 * `setTimeout`, `autoPause`, `autoDelete`; they hold for a detached box whose creating process has exited,
 * survive the reaper being killed (deadlines are stored), and one reaper runs per homeDir. Lifetimes are
 * short (≤ 5 s); the reaper looks every 200 ms; what it does is awaited for up to `EVENTUALLY_MS`.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
// internal: the reaper process is started and checked directly
import { ensureReaper, reaperRunning } from '../src/runtime/reaper.ts';
import {
  BUSYBOX,
  cleanupAll,
  ensureRegistry,
  REGISTRIES,
  run,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

const quiet = { image: BUSYBOX, network: { mode: 'disabled' as const } };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * How long a lifetime action may take to show, ms: the reaper looks every 200 ms, but on a loaded 2-core
 * machine (CI, another test file running boxes) starting a reaper process or pausing or stopping a box
 * can take seconds. The tests assert that an action happens, and separately that it did not happen early.
 */
const EVENTUALLY_MS = 15_000;

/** Polls `probe` every 50 ms until it returns true; the elapsed ms. @throws after `limitMs`. */
async function within(limitMs: number, what: string, probe: () => Promise<boolean>): Promise<number> {
  const t0 = Date.now();
  while (!(await probe())) {
    if (Date.now() - t0 > limitMs) throw new Error(`${what}: not within ${limitMs} ms`);
    await sleep(50);
  }
  return Date.now() - t0;
}

/** Host pids of reaper processes serving `homeDir` (from /proc cmdlines). */
function reapersOf(homeDir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv.some((a) => a.endsWith('reaper-main.ts')) && argv.includes(homeDir) && argv[0] !== 'flock')
        pids.push(Number(entry));
    } catch {}
  }
  return pids;
}

describe('box lifetimes (reaper)', () => {
  let home: string;
  let runtime: JsRuntime;
  let server: RestServer | null = null;

  before(() => {
    ensureRegistry();
    home = tempHome('sandbox-lifetimes-');
    runtime = testRuntime(home);
  });

  after(async () => {
    await server?.close();
    await cleanupAll();
  });

  it('timeoutMs with onTimeout pause pauses the box at its deadline, not before', async () => {
    const t0 = Date.now();
    const box = await runtime.create({ ...quiet, timeoutMs: 1000, onTimeout: 'pause' });
    await within(
      EVENTUALLY_MS,
      'paused by its timeout',
      async () => (await box.info()).state.status === 'paused',
    );
    assert.ok(Date.now() - t0 >= 1000, 'not paused before its timeout (counted from create)');
    await box.resume();
    // The timeout fired once: the box stays running.
    await sleep(500);
    assert.equal((await box.info()).state.status, 'running');
  });

  it('setTimeout replaces the deadline: extended, then shortened to a stop', async () => {
    // The first deadline leaves a loaded machine time to extend it before it passes; the check comes
    // after that deadline and a few reaper passes.
    const t0 = Date.now();
    const box = await runtime.create({ ...quiet, timeoutMs: 4000, onTimeout: 'remove' });
    await box.setTimeout(60_000);
    await sleep(Math.max(0, t0 + 4600 - Date.now()));
    assert.equal((await box.info()).state.status, 'running', 'the extended timeout has not passed');
    await box.setTimeout(300, 'stop');
    await within(
      EVENTUALLY_MS,
      'stopped by the shortened timeout',
      async () => (await box.info()).state.status === 'stopped',
    );
  });

  it('autoPause pauses an idle box but not one running a command; exec restarts the idle clock', async () => {
    // The busy box's command starts at once, well within its 3 s idle limit (with 1 s, a loaded machine
    // could pause it before the command started, while the idle box was being created).
    const busy = await runtime.create({ ...quiet, autoPause: 3 });
    const busySince = Date.now();
    // Runs until ended below, however long the idle box takes to be paused.
    const long = await busy.exec('sleep', ['600']);
    const idle = await runtime.create({ ...quiet, autoPause: 1, autoResume: true });
    await within(EVENTUALLY_MS, 'idle box paused', async () => (await idle.info()).state.status === 'paused');
    // Past the busy box's own idle limit and a reaper pass: only its command keeps it running.
    await sleep(Math.max(0, busySince + 4000 - Date.now()));
    assert.equal((await busy.info()).state.status, 'running', 'a box running a command is not idle');
    // autoResume: the command resumes it, and the idle clock starts again.
    assert.equal((await run(idle, 'echo', ['up'])).stdout, 'up');
    assert.equal((await idle.info()).state.status, 'running');
    await long.kill();
    await long.wait();
    await within(
      EVENTUALLY_MS,
      'busy box paused once idle',
      async () => (await busy.info()).state.status === 'paused',
    );
    // The reaper serves autoPause boxes while they are up, paused ones too (anyone may resume them).
    await runtime.remove(busy.id, true);
    await runtime.remove(idle.id, true);
  });

  it('autoDelete removes a box after it stops', async () => {
    const box = await runtime.create({ ...quiet, autoDelete: 0.5 });
    await sleep(700);
    assert.equal((await box.info()).state.status, 'running', 'a running box is not deleted');
    await box.stop();
    await within(EVENTUALLY_MS, 'removed after stop', async () => (await runtime.getInfo(box.id)) === null);
  });

  it('holds for a detached box whose creating process has exited (the reaper outlives its starter)', async () => {
    const script = `
      import { JsRuntime } from ${JSON.stringify(join(import.meta.dirname, '../src/index.ts'))};
      const runtime = new JsRuntime({ homeDir: process.argv[1], imageRegistries: ${JSON.stringify(REGISTRIES)} });
      const box = await runtime.create({ image: 'busybox:latest', network: { mode: 'disabled' }, detach: true,
        timeoutMs: 1000, onTimeout: 'remove' }, 'orphan');
      process.stdout.write(box.id);`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script, home], {
      encoding: 'utf8',
    });
    assert.equal(child.status, 0, child.stderr);
    await within(
      EVENTUALLY_MS,
      'orphan removed by the reaper',
      async () => (await runtime.getInfo('orphan')) === null,
    );
  });

  it('deadlines are stored: after the reaper is killed, the next runtime on the homeDir starts one', async () => {
    await within(EVENTUALLY_MS, 'reaper exits once no box needs it', async () => !reaperRunning(home));
    const box = await runtime.create({ ...quiet, detach: true, timeoutMs: 60_000, onTimeout: 'stop' });
    await within(EVENTUALLY_MS, 'reaper started', async () => reaperRunning(home));
    for (const pid of reapersOf(home)) process.kill(pid, 'SIGKILL');
    await within(EVENTUALLY_MS, 'reaper gone', async () => !reaperRunning(home));
    await box.setTimeout(300); // stored; this runtime starts a reaper again …
    for (const pid of reapersOf(home)) process.kill(pid, 'SIGKILL');
    // … killed once more: a fresh runtime on the homeDir finds the stored deadline and starts one.
    await within(EVENTUALLY_MS, 'reaper gone again', async () => reapersOf(home).length === 0);
    const fresh = new JsRuntime({ homeDir: home });
    await within(
      EVENTUALLY_MS,
      'stopped at the stored deadline',
      async () => (await fresh.getInfo(box.id))?.state.status === 'stopped',
    );
  });

  it('one reaper per homeDir however many start it', async () => {
    const box = await runtime.create({ ...quiet, timeoutMs: 5000, onTimeout: 'remove' });
    for (let i = 0; i < 5; i++) ensureReaper(home);
    await within(EVENTUALLY_MS, 'a reaper runs', async () => reapersOf(home).length > 0);
    await sleep(800);
    assert.equal(reapersOf(home).length, 1);
    await runtime.remove(box.id, true);
  });

  it('over REST: lifetime options at create and setTimeout', async () => {
    server = await startRestServer({ runtime: testRuntime(home), port: 0 });
    const rest = new JsRuntime({ url: server.url });
    const box = await rest.create({ ...quiet, timeoutMs: 60_000, onTimeout: 'pause' });
    await box.setTimeout(300);
    await within(EVENTUALLY_MS, 'paused over REST', async () => (await box.info()).state.status === 'paused');
    await rest.remove(box.id, true);
    // The OpenAPI document lists the lifecycle routes, and each is a route of the server.
    const doc = (await (await fetch(`${server.url}/v1/openapi.json`)).json()) as {
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, { properties: Record<string, unknown> }> };
    };
    for (const path of ['/v1/boxes/{box}/pause', '/v1/boxes/{box}/resume', '/v1/boxes/{box}/timeout']) {
      assert.ok(doc.paths[path]?.post, path);
      assert.ok(server.app.hasRoute({ method: 'POST', url: path.replace('{box}', ':box') }), path);
    }
    for (const field of ['auto_pause', 'auto_delete', 'auto_resume', 'timeout_ms', 'on_timeout']) {
      assert.ok(doc.components.schemas.BoxOptions?.properties[field], field);
    }
  });
});
