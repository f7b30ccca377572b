/**
 * BoxLite's box process options on both runtimes: `entrypoint` and `cmd` (the box's main process, Docker's
 * composition rule, started again by `start()`), `user` (main process and default of `exec`), and
 * `healthCheck` with `info().healthStatus` (starting → unhealthy after `retries` failures → healthy;
 * `startPeriod`; the default probe; the status read by another runtime instance; no checks while paused); and the field-naming
 * rejections of each option.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  BoxError,
  type JsBox,
  type JsBoxOptions,
  type JsHealthStatus,
  type JsRuntime,
  SimpleBox,
} from '../src/index.ts';
import { BUSYBOX, run } from './runtime-helpers.ts';

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** A runtime under test, and a second runtime instance on the same boxes (another client or process). */
export interface ProcessTarget {
  runtime: JsRuntime;
  reader: JsRuntime;
}

/** Polls `read` every 100 ms until `done` holds (at most `ms`); returns the last value. */
async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  let value = await read();
  while (!done(value) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    value = await read();
  }
  return value;
}

/** Registers the suite; boxes are named with `prefix` and removed at the end. */
export function boxProcessSuite(title: string, prefix: string, setup: () => Promise<ProcessTarget>): void {
  describe(title, () => {
    let runtime: JsRuntime;
    let reader: JsRuntime;
    const name = (suffix: string) => `${prefix}-proc-${suffix}`;
    const quiet: JsBoxOptions = { image: BUSYBOX, network: { mode: 'disabled' } };
    const health = (box: JsBox) => async (): Promise<JsHealthStatus> => (await box.info()).healthStatus!;

    before(async () => {
      ({ runtime, reader } = await setup());
    });

    after(async () => {
      for (const info of await runtime.listInfo()) {
        if (info.name?.startsWith(`${prefix}-proc-`)) await runtime.remove(info.id, true).catch(() => {});
      }
    });

    it('cmd runs as the main process, as user, in workingDir; start() runs it again; exec defaults to user', async () => {
      const box = await runtime.create(
        {
          ...quiet,
          user: '1000:1000',
          workingDir: '/tmp',
          cmd: [
            'sh',
            '-c',
            'echo "main uid=$(id -u) gid=$(id -g) cwd=$PWD" >> /tmp/main.log; exec sleep 600',
          ],
        },
        name('cmd'),
      );
      const log = async () => (await run(box, 'cat', ['/tmp/main.log'])).stdout;
      const line = 'main uid=1000 gid=1000 cwd=/tmp';
      assert.equal(await until(log, (text) => text.length > 0), line);
      // The main process keeps running beside the commands; exec runs as the box's user by default.
      assert.match((await run(box, 'ps', ['-o', 'user,args'])).stdout, /1000\s+sleep 600/);
      assert.equal((await run(box, 'id', ['-u'])).stdout, '1000');
      const asRoot = await box.exec('id', ['-u'], undefined, false, '0');
      assert.equal(await (await asRoot.stdout()).next(), '0');
      await box.stop();
      await box.start();
      assert.equal(await until(log, (text) => text.split('\n').length >= 2), `${line}\n${line}`);
    });

    it("entrypoint alone drops the image's CMD; a main process that cannot start fails the create", async () => {
      const box = await runtime.create(
        { ...quiet, entrypoint: ['/bin/sh', '-c', 'echo "$0 $#" > /tmp/argv; exec sleep 600'] },
        name('entry'),
      );
      // busybox's CMD is ["sh"]: kept, it would be $0 here.
      const argv = async () => (await run(box, 'cat', ['/tmp/argv'])).stdout;
      assert.equal(await until(argv, (text) => text.length > 0), '/bin/sh 0');
      await assert.rejects(
        runtime.create({ ...quiet, entrypoint: ['/no/such/program'] }, name('entry-bad')),
        (e: unknown) => e instanceof BoxError && e.code === 'exec' && e.field === 'entrypoint',
      );
      assert.equal(await runtime.getInfo(name('entry-bad')), null);
    });

    it('healthCheck: starting, unhealthy after `retries` failures, healthy once the check passes; seen by another instance', async () => {
      const box = await runtime.create(
        {
          ...quiet,
          healthCheck: { interval: 0.5, timeout: 1, retries: 2, command: ['CMD-SHELL', 'test -f /tmp/ok'] },
        },
        name('health'),
      );
      assert.deepEqual((await box.info()).healthStatus, { state: 'starting', failures: 0 });
      const sick = await until(health(box), (s) => s.state === 'unhealthy');
      assert.equal(sick.state, 'unhealthy');
      assert.ok(sick.failures >= 2, `failures ${sick.failures}`);
      assert.match(sick.lastCheck!, RFC3339);
      assert.equal((await run(box, 'touch', ['/tmp/ok'])).exitCode, 0);
      const well = await until(health(box), (s) => s.state === 'healthy');
      assert.deepEqual(
        { ...well, lastCheck: undefined },
        { state: 'healthy', failures: 0, lastCheck: undefined },
      );
      assert.ok(Date.parse(well.lastCheck!) > Date.parse(sick.lastCheck!));
      // The status is recorded with the box, not kept in this runtime instance.
      assert.equal((await reader.getInfo(box.id))?.healthStatus?.state, 'healthy');
      // A paused box is not checked (Docker's rule): no failure while frozen, checks go on after resume.
      await run(box, 'rm', ['/tmp/ok']);
      await box.pause();
      // A check in flight when the box froze ends by its timeout (1 s), recorded late on a loaded machine
      // (timers wait for a busy event loop); none starts after it.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const frozenAt = (await box.info()).healthStatus!;
      await new Promise((resolve) => setTimeout(resolve, 2000));
      assert.deepEqual((await box.info()).healthStatus, frozenAt);
      await box.resume();
      assert.equal((await until(health(box), (s) => s.state === 'unhealthy')).state, 'unhealthy');
      // A box without a health check reports none.
      const plain = await runtime.create(quiet, name('no-health'));
      assert.deepEqual((await plain.info()).healthStatus, { state: 'none', failures: 0 });
    });

    it('healthCheck: failures in startPeriod do not count; the default probe and SimpleBox make a box healthy', async () => {
      const patient = await runtime.create(
        { ...quiet, healthCheck: { interval: 0.5, retries: 1, startPeriod: 60, command: ['false'] } },
        name('patient'),
      );
      await using simple = new SimpleBox({
        runtime,
        image: BUSYBOX,
        network: { mode: 'disabled' },
        name: name('simple'),
        cmd: ['sleep', '600'],
        healthCheck: { interval: 0.5 },
      });
      await simple.exec('true');
      const probed = await until(
        async () => (await simple.info()).healthStatus!,
        (s) => s.state === 'healthy',
      );
      assert.equal(probed.state, 'healthy');
      const waiting = await until(health(patient), (s) => s.lastCheck !== undefined);
      assert.equal(waiting.state, 'starting');
      assert.equal(waiting.failures, 0);
    });

    it('invalid entrypoint, cmd, user and healthCheck are refused naming the field', async () => {
      const cases: [Record<string, unknown>, string][] = [
        [{ entrypoint: '/bin/sh' }, 'entrypoint'],
        [{ cmd: ['sh', 7] }, 'cmd[1]'],
        [{ entrypoint: [], cmd: [] }, 'cmd'],
        [{ user: 'root user' }, 'user'],
        [{ healthCheck: 'curl' }, 'healthCheck'],
        [{ healthCheck: { interval: 0 } }, 'healthCheck.interval'],
        [{ healthCheck: { timeout: -1 } }, 'healthCheck.timeout'],
        [{ healthCheck: { retries: 1.5 } }, 'healthCheck.retries'],
        [{ healthCheck: { startPeriod: 'soon' } }, 'healthCheck.startPeriod'],
        [{ healthCheck: { command: ['CMD-SHELL'] } }, 'healthCheck.command'],
        [{ healthCheck: { command: ['NONE'] } }, 'healthCheck.command'],
        [{ healthCheck: { test: ['true'] } }, 'healthCheck.test'],
      ];
      for (const [extra, field] of cases) {
        await assert.rejects(
          runtime.create({ ...quiet, ...extra } as JsBoxOptions, name('invalid')),
          (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === field,
          `${JSON.stringify(extra)} names ${field}`,
        );
      }
      assert.equal(await runtime.getInfo(name('invalid')), null);
    });
  });
}
