/**
 * A box is up when `start` resolves: its init runs the init program, so an `exec` right after the
 * start works. crun 1.8.1's `run --detach` may return before its init process has exec'd; an `exec`
 * reaching that process failed with `setns(pid=…, CLONE_*): Operation not permitted` (ENGINE.md
 * "Start path"), and a detached box's supervisor exiting right after `started` was taken for a failed
 * start. Runs as root with crun or runc installed.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { describe, test } from 'node:test';
// internal: the engine's exec wait is tested as a unit
import { waitForExec } from '../src/engine/host-process.ts';
import { collect, engineTestBed } from './helpers/engine.ts';

const bed = engineTestBed('engine-start-exec-', 'sx');
const { spec } = bed;

describe('start → exec', () => {
  test('concurrent rounds of start → exec true → remove (network disabled) all succeed', async () => {
    // Without the wait for the init's execve, 4 workers × 8 rounds on this 2-core VM failed 1–4 times
    // in 40 (EPERM from crun exec, or "start failed at exited").
    const init = statSync('/usr/bin/catatonit');
    const failures: string[] = [];
    const worker = async (): Promise<void> => {
      for (let round = 0; round < 8; round++) {
        const s = spec();
        try {
          const { pid } = await bed.engine.start(s);
          const exe = statSync(`/proc/${pid}/exe`);
          if (exe.ino !== init.ino || exe.dev !== init.dev)
            failures.push(`${s.id}: init not exec'd at start`);
          const r = await collect(await bed.engine.exec(s.id, { cmd: 'true', args: [], env: [] }));
          if (r.code !== 0) failures.push(`${s.id}: exec exit ${r.code}: ${r.stderr.trim()}`);
        } catch (error) {
          failures.push(`${s.id}: ${(error as Error).message}`);
        } finally {
          await bed.engine.remove(s.id, s.boxDir);
        }
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    assert.deepEqual(failures, []);
  });
});

describe('waitForExec', () => {
  test('resolves true only once the process runs the program, false when it is gone', async () => {
    const sleepBin = statSync('/bin/sleep');
    const child = spawn('/bin/sh', ['-c', 'read line; exec /bin/sleep 30'], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    const pid = child.pid as number;
    try {
      assert.equal(await waitForExec(pid, sleepBin, 50), false, 'still the shell');
      child.stdin.end('go\n');
      assert.equal(await waitForExec(pid, sleepBin, 5000), true);
    } finally {
      child.kill('SIGKILL');
    }
    await new Promise((r) => child.once('exit', r));
    const t0 = performance.now();
    assert.equal(await waitForExec(pid, sleepBin, 5000), false, 'gone');
    assert.ok(performance.now() - t0 < 1000, 'a gone process is not waited for');
  });
});
