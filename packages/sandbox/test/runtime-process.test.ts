/**
 * Boxes across processes (spec 002 `detach`, issue 8 state in SQLite): a detached box created by one
 * Node process is found and used by another; a non-detached box stops when its parent dies, even on
 * SIGKILL; a crash mid-create leaves no half box once a runtime starts again.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
// internal: the state database is read directly
import { StateDb } from '../src/runtime/state.ts';
import {
  BUSYBOX,
  boxDirs,
  cleanupAll,
  ensureRegistry,
  run,
  runtimeChild,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>): Promise<T> {
  for (let i = 0; i < 600; i++) {
    const value = await probe();
    if (value) return value;
    await sleep(25);
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe('boxes across processes', () => {
  before(() => ensureRegistry());

  it('a detached box outlives its creating process and is reattached by another', async () => {
    const home = tempHome();
    const { exited: done } = runtimeChild(
      home,
      `const box = await runtime.create({ image: '${BUSYBOX}', detach: true }, 'keeper');
       const ex = await box.exec('sh', ['-c', 'echo written-by-child > /root/mark']);
       await ex.wait();
       process.stdout.write(box.id);
       process.exit(0);`,
    );
    const result = await done;
    assert.equal(result.code, 0);
    const runtime = testRuntime(home);
    const box = await runtime.get('keeper');
    assert.ok(box, 'the parent finds the box by name');
    assert.equal(box.id, result.stdout);
    const info = await box.info();
    assert.equal(info.state.status, 'running');
    assert.equal(info.network?.publishedPorts, null);
    const r = await run(box, 'cat', ['/root/mark']);
    assert.deepEqual(r, { exitCode: 0, stdout: 'written-by-child', stderr: '' });
    assert.equal((await box.metrics()).commandsExecutedTotal, 2);
    await runtime.remove('keeper', true);
    assert.deepEqual(boxDirs(home), []);
  });

  it('a non-detached box is stopped when its parent is SIGKILLed', async () => {
    const home = tempHome();
    const proc = runtimeChild(
      home,
      `const box = await runtime.create({ image: '${BUSYBOX}' }, 'watched');
       process.stdout.write(box.id);
       setInterval(() => {}, 1000);`,
    );
    const runtime = testRuntime(home);
    await waitFor(
      'the child to create the box',
      async () => (await runtime.getInfo('watched'))?.state.running,
    );
    await proc.kill();
    assert.equal((await proc.exited).signal, 'SIGKILL');
    const stopped = await waitFor('the box to stop', async () => {
      const info = await runtime.getInfo('watched');
      return info?.state.status === 'stopped' ? info : null;
    });
    assert.equal(stopped.state.running, false);
    await runtime.remove('watched');
    assert.deepEqual(boxDirs(home), []);
  });

  it('a SimpleBox (autoRemove) left running by an exiting process is gone for the next runtime', async () => {
    const home = tempHome();
    const simpleModule = join(import.meta.dirname, '..', 'src', 'index.ts');
    const proc = runtimeChild(
      home,
      `const { SimpleBox } = await import(${JSON.stringify(simpleModule)});
       const box = new SimpleBox({ runtime, image: '${BUSYBOX}', name: 'forgotten' });
       await box.exec('true');
       process.exit(0);`,
    );
    assert.equal((await proc.exited).code, 0);
    const runtime = testRuntime(home);
    await waitFor(
      'the forgotten box to be cleaned up',
      async () => (await runtime.getInfo('forgotten')) === null,
    );
    assert.deepEqual(boxDirs(home), []);
  });

  it('a crash in the middle of create leaves no half box after the next start', async () => {
    const home = tempHome();
    const proc = runtimeChild(
      home,
      `await runtime.create({ image: 'python:slim' }, 'half'); process.exit(0);`,
    );
    const db = new StateDb(home);
    // Kill the creating process as soon as its record exists (the image is still being pulled then).
    await waitFor('the creating record', async () => db.listBoxes().some((b) => b.status === 'creating'));
    await proc.kill();
    await proc.exited;
    assert.equal(db.listBoxes().length, 1, 'the record of the half box is there before recovery');
    db.close();
    const runtime = testRuntime(home);
    assert.deepEqual(await runtime.listInfo(), []);
    assert.deepEqual(boxDirs(home), []);
    const after = new StateDb(home);
    assert.deepEqual(after.listBoxes(), []);
    after.close();
  });
});

after(cleanupAll);
