/**
 * Box lifecycle on both runtimes (BoxLite's lifecycle surface): `box.start()` after `stop()` keeps the
 * writable layer and volumes, `autoRemove` boxes are gone once stopped, `getOrCreate`,
 * `SimpleBox({ reuseExisting })`, and `runtime.shutdown(timeout)` stops this runtime's non-detached boxes,
 * leaves detached ones and refuses new boxes, pools and pulls afterwards (so it runs last).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BoxError, type JsRuntime, SimpleBox } from '../src/index.ts';
import { BUSYBOX, run } from './runtime-helpers.ts';

/** A runtime under test. */
export interface LifecycleTarget {
  kind: 'local' | 'rest';
  runtime: JsRuntime;
}

/** Registers the lifecycle suite; boxes are named with `prefix` and removed at the end. */
export function lifecycleSuite(title: string, prefix: string, setup: () => Promise<LifecycleTarget>): void {
  describe(title, () => {
    let runtime: JsRuntime;
    const name = (suffix: string) => `${prefix}-lc-${suffix}`;
    const quiet = { image: BUSYBOX, network: { mode: 'disabled' as const } };

    before(async () => {
      runtime = (await setup()).runtime;
    });

    after(async () => {
      for (const info of await runtime.listInfo()) {
        if (info.name?.startsWith(`${prefix}-lc-`)) await runtime.remove(info.id, true).catch(() => {});
      }
    });

    it('start() after stop() resumes the writable layer and the volumes; startedAt moves', async () => {
      const box = await runtime.create(
        { ...quiet, volumes: [{ managedVolume: name('vol'), guestPath: '/vol' }] },
        name('restart'),
      );
      await box.files.write('/layer.txt', 'in the writable layer');
      assert.equal((await run(box, 'sh', ['-c', 'echo in-volume > /vol/v.txt'])).exitCode, 0);
      const first = await box.info();
      await box.stop();
      assert.equal((await box.info()).state.status, 'stopped');
      await assert.rejects(box.exec('true'), (e: unknown) => e instanceof BoxError && e.code === 'conflict');
      await box.start();
      const again = await box.info();
      assert.equal(again.state.status, 'running');
      assert.ok(Date.parse(again.startedAt!) >= Date.parse(first.startedAt!));
      assert.notEqual(again.state.pid, undefined);
      assert.equal(await box.files.read('/layer.txt'), 'in the writable layer');
      assert.equal((await run(box, 'cat', ['/vol/v.txt'])).stdout, 'in-volume');
      await box.start(); // running: no-op
      assert.equal((await box.info()).state.pid, again.state.pid);
      // A handle from get() can start it too.
      await box.stop();
      await (await runtime.get(name('restart')))!.start();
      assert.equal((await runtime.getInfo(name('restart')))!.state.running, true);
    });

    it('an autoRemove box is gone once stopped; start() then fails with not_found', async () => {
      const box = await runtime.create({ ...quiet, autoRemove: true }, name('auto'));
      await box.stop();
      assert.equal(await runtime.get(name('auto')), null);
      await assert.rejects(box.start(), (e: unknown) => e instanceof BoxError && e.code === 'not_found');
    });

    it('getOrCreate returns the existing box by name, else creates it', async () => {
      const first = await runtime.getOrCreate(quiet, name('goc'));
      assert.equal(first.created, true);
      const second = await runtime.getOrCreate({ image: 'unused:image' }, name('goc'));
      assert.equal(second.created, false);
      assert.equal(second.box.id, first.box.id);
      // Concurrent callers on a fresh name get one box.
      const both = await Promise.all([
        runtime.getOrCreate(quiet, name('goc-race')),
        runtime.getOrCreate(quiet, name('goc-race')),
      ]);
      assert.equal(both[0].box.id, both[1].box.id);
      assert.deepEqual(both.map((r) => r.created).sort(), [false, true]);
    });

    it('SimpleBox reuseExisting uses the box of that name; created tells which', async () => {
      const keep = { runtime, ...quiet, name: name('simple'), autoRemove: false };
      const one = new SimpleBox(keep);
      assert.equal(one.created, undefined);
      await one.exec('sh', '-c', 'echo kept > /kept');
      assert.equal(one.created, true);
      const two = new SimpleBox({ ...keep, reuseExisting: true });
      assert.equal((await two.exec('cat', '/kept')).stdout, 'kept\n');
      assert.equal(two.created, false);
      assert.equal(await two.getId(), await one.getId());
      assert.equal((await two.info()).id, await one.getId());
      assert.equal((await two.metrics()).commandsExecutedTotal >= 2, true);
      await assert.rejects(
        new SimpleBox({ ...keep }).exec('true'),
        (e: unknown) => e instanceof BoxError && e.code === 'conflict' && e.field === 'name',
      );
      assert.throws(
        () => new SimpleBox({ runtime, reuseExisting: true }),
        (e: unknown) => e instanceof BoxError && e.field === 'reuseExisting',
      );
      await one.stop();
    });

    // Last: shutdown() closes the runtime for new boxes.
    it('shutdown(timeout) stops the non-detached boxes this runtime created, not detached ones', async () => {
      const attached = await runtime.create(quiet, name('sd-attached'));
      const detached = await runtime.create({ ...quiet, detach: true }, name('sd-detached'));
      // A command that ignores SIGTERM is killed after the timeout.
      const stubborn = await attached.exec('sh', ['-c', "trap '' TERM; sleep 60"]);
      await runtime.shutdown(1);
      assert.equal((await attached.info()).state.status, 'stopped');
      assert.notEqual((await stubborn.wait()).exitCode, 0);
      assert.equal((await detached.info()).state.status, 'running');
      await assert.rejects(
        runtime.shutdown(-1),
        (e: unknown) => e instanceof BoxError && e.field === 'timeout',
      );
      // As in BoxLite, a shut-down runtime makes nothing new; it still lists and removes.
      const shutDown = (e: unknown) =>
        e instanceof BoxError && e.code === 'conflict' && /shut down/.test(e.message);
      await assert.rejects(runtime.create(quiet, name('sd-after')), shutDown);
      await assert.rejects(runtime.getOrCreate(quiet, name('sd-after')), shutDown);
      await assert.rejects(runtime.images.pull(BUSYBOX), shutDown);
      assert.throws(() => runtime.pool({ image: BUSYBOX, size: 1, options: quiet }), shutDown);
      assert.equal(await runtime.getInfo(name('sd-after')), null);
      assert.ok((await runtime.images.list()).length > 0);
    });
  });
}
