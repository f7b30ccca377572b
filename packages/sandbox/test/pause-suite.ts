/**
 * Pause and resume on both runtimes (issue 18): the cgroup freezer stops a busy box's CPU use, the
 * paused state is seen by every runtime on the homeDir, commands are refused (or resume the box with
 * `autoResume`), files stay reachable, and stopping or removing a paused box leaves no process behind.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BoxError, type JsBox, JsRuntime } from '../src/index.ts';
// internal: processIdentity tells whether a box's process still runs
import { processIdentity } from '../src/runtime/state.ts';
import { BUSYBOX, run } from './runtime-helpers.ts';

/** A runtime under test, and a second view of the same boxes (another runtime on the homeDir). */
export interface PauseTarget {
  kind: 'local' | 'rest';
  runtime: JsRuntime;
  homeDir: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** CPU use of the box over `ms`, percent of its allowance (two metrics samples). */
async function cpuOver(box: JsBox, ms: number): Promise<number> {
  await box.metrics();
  await sleep(ms);
  return (await box.metrics()).cpuPercent ?? Number.NaN;
}

/** True when `pid` exists on the host and is not a zombie (an exited init not yet reaped). */
function hostProcessAlive(pid: number): boolean {
  return processIdentity(pid) !== null;
}

/** Registers the pause suite; boxes are named with `prefix` and removed at the end. */
export function pauseSuite(title: string, prefix: string, setup: () => Promise<PauseTarget>): void {
  describe(title, () => {
    let target: PauseTarget;
    const name = (suffix: string) => `${prefix}-pz-${suffix}`;
    const quiet = { image: BUSYBOX, network: { mode: 'disabled' as const } };

    before(async () => {
      target = await setup();
    });

    after(async () => {
      for (const info of await target.runtime.listInfo()) {
        if (info.name?.startsWith(`${prefix}-pz-`))
          await target.runtime.remove(info.id, true).catch(() => {});
      }
    });

    it('pause freezes a busy box (no CPU, status paused everywhere, exec refused); resume continues it', async () => {
      const { runtime } = target;
      const box = await runtime.create(quiet, name('busy'));
      await box.exec('sh', ['-c', 'while :; do :; done']);
      assert.ok((await cpuOver(box, 400)) > 30, 'the busy loop uses CPU before the pause');

      await box.pause();
      const info = await box.info();
      assert.equal(info.state.status, 'paused');
      assert.equal(info.state.running, false);
      // Another runtime on the same homeDir reads the state back from the cgroup.
      const other = new JsRuntime({ homeDir: target.homeDir });
      assert.equal((await other.getInfo(box.id))!.state.status, 'paused');
      assert.equal((await runtime.listInfo()).find((i) => i.id === box.id)?.state.status, 'paused');
      assert.equal(await cpuOver(box, 500), 0, 'a paused box uses no CPU');

      await assert.rejects(
        box.exec('echo', ['no']),
        (e: unknown) => e instanceof BoxError && e.code === 'conflict' && /paused/.test(e.message),
      );
      // Files are the host's business: reachable while paused.
      await box.files.write('/paused.txt', 'written while paused');
      assert.equal(await box.files.read('/paused.txt'), 'written while paused');
      await box.pause(); // paused: no-op
      await assert.rejects(
        runtime.remove(box.id),
        (e: unknown) => e instanceof BoxError && e.code === 'conflict',
      );

      await box.resume();
      assert.equal((await box.info()).state.status, 'running');
      assert.equal((await run(box, 'cat', ['/paused.txt'])).stdout, 'written while paused');
      assert.ok((await cpuOver(box, 400)) > 30, 'the busy loop runs again after resume');
      await box.resume(); // running: no-op
    });

    it('autoResume: a command on a paused box resumes it first', async () => {
      const box = await target.runtime.create({ ...quiet, autoResume: true }, name('auto'));
      await box.pause();
      assert.equal((await box.info()).state.status, 'paused');
      const result = await run(box, 'echo', ['resumed']);
      assert.equal(result.stdout, 'resumed');
      assert.equal((await box.info()).state.status, 'running');
    });

    it('stop() and remove(force) of a paused box leave no box process on the host', async () => {
      const a = await target.runtime.create(quiet, name('stop'));
      await a.exec('sleep', ['600']);
      const pidA = (await a.info()).state.pid!;
      await a.pause();
      await a.stop();
      assert.equal((await a.info()).state.status, 'stopped');
      assert.equal(hostProcessAlive(pidA), false);
      // A stopped box can be neither paused nor resumed.
      await assert.rejects(a.pause(), (e: unknown) => e instanceof BoxError && e.code === 'conflict');
      await assert.rejects(a.resume(), (e: unknown) => e instanceof BoxError && e.code === 'conflict');

      const b = await target.runtime.create(quiet, name('remove'));
      const pidB = (await b.info()).state.pid!;
      await b.pause();
      await target.runtime.remove(b.id, true);
      assert.equal(await target.runtime.getInfo(b.id), null);
      assert.equal(hostProcessAlive(pidB), false);
    });

    it('setTimeout and lifetime options reject bad values naming the field', async () => {
      const box = await target.runtime.create(quiet, name('bad'));
      await assert.rejects(
        box.setTimeout(-1),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === 'timeoutMs',
      );
      await assert.rejects(
        box.setTimeout(1000, 'explode' as 'stop'),
        (e: unknown) => e instanceof BoxError && e.field === 'onTimeout',
      );
      for (const [field, value] of [
        ['autoPause', 0],
        ['autoDelete', -1],
        ['autoResume', 'yes'],
        ['timeoutMs', 'soon'],
        ['onTimeout', 'kill'],
      ] as const) {
        await assert.rejects(
          target.runtime.create({ ...quiet, [field]: value }),
          (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === field,
          field,
        );
      }
    });
  });
}
