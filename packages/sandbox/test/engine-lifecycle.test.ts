/**
 * Engine lifecycle under stress and failure: 20 boxes started, used and removed concurrently
 * with nothing leaked (process, mount, cgroup, runtime state, index entry); a non-detached box is
 * stopped when its creating process is SIGKILLed; a detached one survives it and can be driven and
 * removed from another process; `list()` finds leftovers for garbage collection.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
// internal: the engine is tested as a unit
import {
  createEngine,
  type EngineBoxSpec,
  makeBusyboxRootfs,
  mountsUnder,
  type OciEngine,
} from '../src/engine/index.ts';
import { specFactory } from './helpers/engine.ts';

const tmp = mkdtempSync(join(tmpdir(), 'engine-life-'));
const stateRoot = join(tmp, 'state');
const rootfs = makeBusyboxRootfs(join(tmp, 'layer0'));
const engineIndex = resolve(import.meta.dirname, '../src/engine/index.ts');
let engine: OciEngine;
const spec = specFactory(tmp, rootfs, 'life', { cpus: 0.5, memoryMib: 64, pidsLimit: 32, detach: false });

async function output(id: string, script: string): Promise<string> {
  const p = await engine.exec(id, { cmd: 'sh', args: ['-c', script], env: [] });
  const chunks: Buffer[] = [];
  p.stderr.resume();
  for await (const c of p.stdout) chunks.push(c as Buffer);
  await p.exited;
  return Buffer.concat(chunks).toString();
}

/** Cgroup directories of a box in any hierarchy (v1 controllers or v2). */
function cgroupDirs(id: string): string[] {
  const roots = existsSync('/sys/fs/cgroup/memory')
    ? readdirSync('/sys/fs/cgroup').map((c) => join('/sys/fs/cgroup', c))
    : ['/sys/fs/cgroup'];
  return roots.map((r) => join(r, 'seed-sandbox', id)).filter((d) => existsSync(d));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Host pids of the engine's supervisor processes for box `id` (their environment names it). */
function supervisorsOf(id: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, 'utf8').split('\0').includes(`SB_ID=${id}`))
        out.push(Number(name));
    } catch {}
  }
  return out;
}

async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Runs a Node child that starts a box with `detach` and prints its init pid, then idles. */
async function startInChild(s: EngineBoxSpec): Promise<{ child: ReturnType<typeof spawn>; pid: number }> {
  const script = join(tmp, `child-${s.id}.ts`);
  writeFileSync(
    script,
    `import { createEngine } from ${JSON.stringify(engineIndex)};
const engine = await createEngine({ stateRoot: ${JSON.stringify(stateRoot)} });
const started = await engine.start(${JSON.stringify(s)});
console.log(started.pid);
setInterval(() => {}, 1000);
`,
  );
  const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pid = await new Promise<number>((res, rej) => {
    child.stdout?.once('data', (d: Buffer) => res(Number(d.toString().trim())));
    child.once('exit', (code) => rej(new Error(`child exited with ${code}`)));
  });
  return { child, pid };
}

before(async () => {
  engine = await createEngine({ stateRoot });
});

after(async () => {
  for (const b of await engine.list()) await engine.remove(b.id, b.boxDir ?? join(tmp, 'boxes', b.id));
  rmSync(tmp, { recursive: true, force: true });
});

test('20 boxes started, used and removed concurrently leave no process, mount, cgroup or state', async () => {
  const specs = Array.from({ length: 20 }, () => spec());
  const started = await Promise.all(specs.map((s) => engine.start(s)));
  const outputs = await Promise.all(specs.map((s) => output(s.id, 'hostname; echo $((6*7))')));
  assert.deepEqual(
    outputs,
    specs.map((s) => `${s.id}\n42\n`),
  );
  for (const s of specs) assert.equal(cgroupDirs(s.id).length > 0, true);
  await Promise.all(specs.map((s) => engine.remove(s.id, s.boxDir)));
  for (const [i, s] of specs.entries()) {
    assert.equal(alive(started[i]?.pid as number), false, `init of ${s.id} still runs`);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    assert.deepEqual(cgroupDirs(s.id), []);
    assert.deepEqual(readdirSync(s.boxDir), []);
  }
  await until('the supervisors to exit', () => specs.every((s) => supervisorsOf(s.id).length === 0));
  const ids = new Set(specs.map((s) => s.id));
  assert.equal((await engine.list()).filter((b) => ids.has(b.id)).length, 0);
});

test('a non-detached box is stopped and unmounted when its creating process is SIGKILLed', async () => {
  const s = spec({ detach: false });
  const { child, pid } = await startInChild(s);
  assert.equal(alive(pid), true);
  assert.equal((await engine.state(s.id)).status, 'running');
  assert.equal(supervisorsOf(s.id).length, 1);
  child.kill('SIGKILL');
  await until('the box to stop', () => !alive(pid));
  await until('the root to be unmounted', () => mountsUnder(s.boxDir).length === 0);
  await until('the container to be deleted', async () => (await engine.state(s.id)).status !== 'running');
  assert.deepEqual(cgroupDirs(s.id), []);
  await until('the supervisor to exit', () => supervisorsOf(s.id).length === 0);
  // The box directory is kept (a stopped box); the engine can restart or remove it.
  const rec = (await engine.list()).find((b) => b.id === s.id);
  assert.equal(rec?.status, 'stopped');
  await engine.remove(s.id, s.boxDir);
});

test('a detached box survives its creator, is usable from another engine, and list() finds it', async () => {
  const s = spec({ detach: true });
  const { child, pid } = await startInChild(s);
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(alive(pid), true);
  const other = await createEngine({ stateRoot });
  const rec = (await other.list()).find((b) => b.id === s.id);
  assert.deepEqual(rec, {
    id: s.id,
    boxDir: s.boxDir,
    status: 'running',
    pid,
    mounts: [join(s.boxDir, 'rootfs'), join(s.boxDir, 'disk')],
  });
  assert.equal(await output(s.id, 'echo still here'), 'still here\n');
  await other.remove(s.id, s.boxDir);
  assert.equal(alive(pid), false);
  assert.deepEqual(mountsUnder(s.boxDir), []);
});

test('network hooks: setup gets the init pid of a separate netns, a failing setup tears the box down', async () => {
  const seen: string[] = [];
  const hooked = await createEngine({
    stateRoot,
    networkSetup: async (ctx) => {
      const boxNet = readlinkSync(`/proc/${ctx.pid}/ns/net`);
      assert.notEqual(boxNet, readlinkSync('/proc/self/ns/net'));
      seen.push(`setup ${ctx.id} ${ctx.network.mode}`);
      if (ctx.id.endsWith('fail')) throw new Error('no slirp today');
    },
    networkTeardown: async (id) => {
      seen.push(`teardown ${id}`);
    },
  });
  const ok = spec({ network: { mode: 'enabled', allowNet: [] } });
  await hooked.start(ok);
  await hooked.remove(ok.id, ok.boxDir);
  const bad = spec({ id: `life${process.pid}fail` });
  await assert.rejects(hooked.start(bad), /network setup failed: no slirp today/);
  assert.deepEqual(mountsUnder(bad.boxDir), []);
  assert.equal((await hooked.state(bad.id)).status !== 'running', true);
  await hooked.remove(bad.id, bad.boxDir);
  assert.deepEqual(seen, [
    `setup ${ok.id} enabled`,
    `teardown ${ok.id}`,
    `setup ${bad.id} disabled`,
    `teardown ${bad.id}`,
  ]);
});
