/**
 * The container tier links a box's network while crun sets the box up: the script the
 * `networkLinkScript` hook gives runs from crun's `createRuntime` hook inside the box's own network
 * namespace (never the host's), `networkSetup` gets its outcome as `ctx.linked` before `start`
 * resolves, and a failing script or a refused gate fails the start with nothing of the box left on the
 * host (process, mount, runtime state). Real boxes on a busybox layer, crun only (runc links the box
 * from the network hook instead).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
// internal: the engine's network hooks are tested as a unit
import {
  createEngine,
  type EngineNetworkContext,
  makeBusyboxRootfs,
  mountsUnder,
  type OciEngine,
} from '../src/engine/index.ts';
import { execSh, specFactory } from './helpers/engine.ts';

const tmp = mkdtempSync(join(tmpdir(), 'net-link-'));
const rootfs = makeBusyboxRootfs(join(tmp, 'layer0'));
const spec = specFactory(tmp, rootfs, 'nlink', { network: { mode: 'enabled', allowNet: [] } });
/** What each box's link hook gives the engine, by box id (a missing id: no script). */
const scripts = new Map<string, { ready: Promise<void>; script: string }>();
/** Box ids the engine asked a link script for. */
const asked: string[] = [];
/** The `linked` outcome each `networkSetup` saw, by box id. */
const seen = new Map<string, 'none' | 'ok' | string>();
let engine: OciEngine;

before(async () => {
  engine = await createEngine({
    stateRoot: join(tmp, 'state'),
    networkLinkScript: (id) => {
      asked.push(id);
      return scripts.get(id);
    },
    networkSetup: async (ctx: EngineNetworkContext) => {
      if (!ctx.linked) {
        seen.set(ctx.id, 'none');
        return;
      }
      try {
        await ctx.linked;
        seen.set(ctx.id, 'ok');
      } catch (error) {
        seen.set(ctx.id, (error as Error).message);
        throw error;
      }
    },
  });
});

after(async () => {
  for (const b of await engine.list()) await engine.remove(b.id, b.boxDir ?? join(tmp, 'boxes', b.id));
  rmSync(tmp, { recursive: true, force: true });
});

const skip = () => (engine.name === 'crun' ? false : 'the createRuntime hook is used with crun only');

/** Host processes whose environment names box `id` (its supervisor). */
function processesOf(id: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/environ`, 'utf8').split('\0').includes(`SB_ID=${id}`)) out.push(+name);
    } catch {}
  }
  return out;
}

/** Asserts that nothing of box `id` is left on the host after a failed start. */
async function assertGone(id: string, boxDir: string): Promise<void> {
  assert.deepEqual(mountsUnder(boxDir), [], 'no mount under the box directory');
  assert.deepEqual(processesOf(id), [], 'no supervisor of the box');
  assert.notEqual((await engine.state(id)).status, 'running');
  assert.equal(existsSync(join(tmp, 'state', 'crun', id)), false, 'crun keeps no state of the box');
}

test('the link script runs in the box network namespace before start resolves', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const s = spec();
  const device = `lk${process.pid % 100000}`;
  scripts.set(s.id, {
    ready: Promise.resolve(),
    script: `ip link add ${device} type veth peer name ${device}p\n`,
  });
  await engine.start(s);
  assert.equal(seen.get(s.id), 'ok');
  const inBox = await execSh(engine, s.id, 'cat /proc/net/dev');
  assert.equal(inBox.code, 0, inBox.stderr);
  assert.match(inBox.stdout, new RegExp(`\\b${device}:`), 'the device is in the box');
  const onHost = spawnSync('ip', ['link', 'show', device], { encoding: 'utf8' });
  assert.notEqual(onHost.status, 0, 'the device is not on the host');
  await engine.remove(s.id, s.boxDir);
});

test('a failing link script fails the start and leaves nothing of the box', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const s = spec();
  scripts.set(s.id, { ready: Promise.resolve(), script: 'echo broken link >&2\nexit 3\n' });
  await assert.rejects(engine.start(s), /network setup failed: .*broken link/);
  assert.match(seen.get(s.id) ?? '', /broken link/);
  await assertGone(s.id, s.boxDir);
});

test('a refused gate fails the start before the box runs', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const s = spec();
  scripts.set(s.id, { ready: Promise.reject(new Error('gateway refused')), script: 'exit 0\n' });
  await assert.rejects(engine.start(s), /network setup failed: gateway refused/);
  assert.equal(seen.has(s.id), false, 'the network hook never ran');
  await assertGone(s.id, s.boxDir);
});

test('without a script (or with the network off) the network hook links the box itself', async (t) => {
  if (skip()) return t.skip(skip() as string);
  const on = spec();
  await engine.start(on);
  assert.equal(seen.get(on.id), 'none');
  const off = spec({ network: { mode: 'disabled', allowNet: [] } });
  await engine.start(off);
  assert.equal(asked.includes(off.id), false, 'no script is asked for a box without network');
  assert.equal(seen.get(off.id), 'none');
  await engine.remove(on.id, on.boxDir);
  await engine.remove(off.id, off.boxDir);
});
