/**
 * `SimpleBox` (spec 002 "SimpleBox") against real busybox boxes: lazy start, variadic and array `exec`
 * with env/cwd/user/timeoutSecs, `id` before start, `autoRemove` default true, async disposal.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BoxError, type JsRuntime, SimpleBox, TimeoutError } from '../src/index.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

describe('SimpleBox', () => {
  let runtime: JsRuntime;

  before(() => {
    ensureRegistry();
    runtime = testRuntime();
  });

  it('starts lazily on the first command; id throws before that', async () => {
    const box = new SimpleBox({ image: BUSYBOX, runtime, name: 'lazy' });
    assert.equal(box.name, 'lazy');
    assert.throws(
      () => box.id,
      (error: unknown) => error instanceof BoxError && /not started/.test(error.message),
    );
    assert.equal(await runtime.getInfo('lazy'), null, 'nothing is created by the constructor');
    const result = await box.exec('echo', 'a', 'b c');
    assert.deepEqual(result, { exitCode: 0, stdout: 'a b c\n', stderr: '' });
    assert.match(box.id, /^[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.equal(await box.getId(), box.id);
    const info = await box.getInfo();
    assert.equal(info.name, 'lazy');
    assert.equal(info.image, BUSYBOX);
    assert.equal(info.state.running, true);
    await box.stop();
    assert.equal(await runtime.getInfo('lazy'), null, 'autoRemove defaults to true');
  });

  it('array form: env, cwd, user; non-zero exit codes are returned, not thrown', async () => {
    const box = new SimpleBox({ image: BUSYBOX, runtime, env: { BOX_VAR: 'from-box' } });
    const r = await box.exec(
      'sh',
      ['-c', 'echo "$BOX_VAR $CMD_VAR"; pwd; id -u; echo bad >&2; exit 5'],
      { CMD_VAR: 'from-cmd' },
      {
        cwd: '/tmp',
        user: '65534',
      },
    );
    assert.deepEqual(r, { exitCode: 5, stdout: 'from-box from-cmd\n/tmp\n65534\n', stderr: 'bad\n' });
    const root = await box.exec('id', ['-u'], undefined, {});
    assert.equal(root.stdout, '0\n');
    await box.stop();
  });

  it('timeoutSecs kills the command and throws TimeoutError; the box stays usable', async () => {
    const box = new SimpleBox({ image: BUSYBOX, runtime });
    await assert.rejects(box.exec('sleep', ['30'], undefined, { timeoutSecs: 0.3 }), (error: unknown) => {
      return (
        error instanceof TimeoutError && error instanceof BoxError && /timeoutSecs=0.3/.test(error.message)
      );
    });
    assert.equal((await box.exec('echo', 'still here')).stdout, 'still here\n');
    await assert.rejects(box.exec('true', [], undefined, { timeoutSecs: -1 }), /timeoutSecs/);
    await box.stop();
  });

  it('passes the box options: cpus, memoryMib, workingDir, volumes, network', async () => {
    const dir = tempHome('sandbox-sb-');
    writeFileSync(join(dir, 'f'), 'shared\n');
    const box = new SimpleBox({
      image: BUSYBOX,
      runtime,
      cpus: 2,
      memoryMib: 256,
      workingDir: '/srv',
      volumes: [{ hostPath: dir, guestPath: '/mnt/host', readOnly: true }],
      network: { mode: 'disabled' },
    });
    const r = await box.exec('sh', ['-c', 'pwd; cat /mnt/host/f']);
    assert.equal(r.stdout, '/srv\nshared\n');
    const info = await box.getInfo();
    assert.equal(info.cpus, 2);
    assert.equal(info.memoryMib, 256);
    assert.equal(info.network?.mode, 'disabled');
    await box.stop();
  });

  it('autoRemove false keeps the stopped box; async disposal stops it', async () => {
    const id = await (async () => {
      await using box = new SimpleBox({ image: BUSYBOX, runtime, autoRemove: false, name: 'kept' });
      await box.exec('true');
      return box.id;
    })();
    const info = await runtime.getInfo(id);
    assert.equal(info?.state.status, 'stopped');
    await runtime.remove(id);

    const disposed = new SimpleBox({ image: BUSYBOX, runtime });
    await disposed.exec('true');
    await disposed[Symbol.asyncDispose]();
    assert.equal(await runtime.getInfo(disposed.id), null);
    // Disposing a box that never started creates nothing.
    await new SimpleBox({ image: BUSYBOX, runtime })[Symbol.asyncDispose]();
  });

  it('concurrent first commands share one box', async () => {
    const box = new SimpleBox({ image: BUSYBOX, runtime });
    const results = await Promise.all([box.exec('hostname'), box.exec('hostname'), box.exec('hostname')]);
    assert.equal(new Set(results.map((r) => r.stdout)).size, 1);
    assert.equal((await runtime.listInfo()).filter((i) => i.id === box.id).length, 1);
    await box.stop();
  });
});

after(cleanupAll);
