/**
 * One behavioural suite, two runtimes (issue 10): the runtime behaviour of spec 002 — create, list, get,
 * info, exec streams, wait, kill, stop, remove, metrics, SimpleBox, CodeBox — asserted the same way
 * against the local `JsRuntime` and the REST `JsRuntime` (`new JsRuntime({ url })` on a `sandbox serve`
 * server). Only the spec's REST rules differ (publishedPorts of a loaded handle).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  BoxError,
  CodeBox,
  ExecError,
  JsBox,
  JsExecution,
  type JsRuntime,
  SimpleBox,
  TimeoutError,
} from '../src/index.ts';
import { BUSYBOX, run } from './runtime-helpers.ts';

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** A runtime under test: `kind` selects the few spec rules that differ between local and REST. */
export interface SuiteTarget {
  kind: 'local' | 'rest';
  runtime: JsRuntime;
}

/**
 * Registers the shared suite. `setup` runs once before the tests (start servers there) and returns the
 * runtime; boxes the suite creates are named with `prefix` and removed at the end.
 */
export function runtimeSuite(title: string, prefix: string, setup: () => Promise<SuiteTarget>): void {
  describe(title, () => {
    let target: SuiteTarget;
    let runtime: JsRuntime;
    const name = (suffix: string) => `${prefix}-${suffix}`;

    before(async () => {
      target = await setup();
      runtime = target.runtime;
    });

    after(async () => {
      for (const info of await runtime.listInfo()) {
        if (info.name?.startsWith(`${prefix}-`)) await runtime.remove(info.id, true).catch(() => {});
      }
    });

    it('create with the spec defaults; info, getInfo, get and listInfo', async () => {
      const box = await runtime.create({ image: BUSYBOX }, name('defaults'));
      // One handle class for both runtimes: users and wrappers may check it.
      assert.ok(box instanceof JsBox);
      assert.match(box.id, ULID);
      assert.equal(box.name, name('defaults'));
      const info = await box.info();
      assert.equal(info.id, box.id);
      assert.equal(info.name, name('defaults'));
      assert.deepEqual(
        { ...info.state, pid: undefined },
        { status: 'running', running: true, pid: undefined },
      );
      assert.ok(info.state.pid && info.state.pid > 1);
      assert.match(info.startedAt!, RFC3339);
      assert.ok(Date.parse(info.startedAt!) >= Date.parse(info.createdAt));
      assert.equal(info.image, BUSYBOX);
      assert.equal(info.cpus, 1);
      assert.equal(info.memoryMib, 512);
      assert.deepEqual(info.network, {
        outbound: { mode: 'enabled', allowNet: [] },
        inbound: { mode: 'enabled', allowNet: [] },
        publishedPorts: [],
        mode: 'enabled',
        allowNet: [],
      });
      assert.equal((await runtime.getInfo(box.id))?.name, name('defaults'));
      assert.equal((await runtime.getInfo(name('defaults')))?.id, box.id);
      const loaded = await runtime.get(name('defaults'));
      assert.equal(loaded?.id, box.id);
      assert.equal(loaded?.name, name('defaults'));
      assert.ok(loaded instanceof JsBox);
      // Spec: a loaded local handle does not know the publications (null); REST reads the server's
      // current record, and the server created this box with no publications ([]).
      assert.deepEqual((await loaded!.info()).network?.publishedPorts, target.kind === 'rest' ? [] : null);
      assert.ok((await runtime.listInfo()).some((i) => i.id === box.id && i.state.running));
      assert.equal(await runtime.getInfo(name('missing')), null);
      assert.equal(await runtime.get(name('missing')), null);
      // workingDir /root, hostname = name, the image's env (PATH) present.
      const r = await run(box, 'sh', ['-c', 'pwd; hostname; echo $PATH']);
      assert.equal(r.exitCode, 0, r.stderr);
      const [pwd, hostname, path] = r.stdout.split('\n');
      assert.deepEqual([pwd, hostname], ['/root', name('defaults')]);
      assert.match(path!, /\/bin/);
      if (target.kind === 'local') {
        // The image of a box cannot be removed from the store while the box exists.
        await assert.rejects(runtime.images.remove(BUSYBOX), new RegExp(`used by box ${name('defaults')}`));
      }
      await runtime.remove(box.id, true);
      assert.equal(await runtime.getInfo(box.id), null);
    });

    it('applies cpus, memoryMib, workingDir, env, network and managed volumes', async () => {
      const box = await runtime.create(
        {
          image: BUSYBOX,
          cpus: 0.5,
          memoryMib: 128,
          workingDir: '/tmp',
          env: [{ key: 'GREETING', value: 'hello box' }],
          network: { mode: 'disabled' },
          volumes: [{ managedVolume: name('vol'), guestPath: '/vol' }],
        },
        name('options'),
      );
      const info = await box.info();
      assert.equal(info.cpus, 0.5);
      assert.equal(info.memoryMib, 128);
      assert.equal(info.network?.outbound.mode, 'disabled');
      const r = await run(box, 'sh', [
        '-c',
        `pwd; echo "$GREETING"; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; echo kept > /vol/f`,
      ]);
      assert.equal(r.stdout, '/tmp\nhello box\nlo');
      await runtime.remove(box.id, true);
      const volume = await runtime.volumes.get(name('vol'));
      assert.match(volume!.id, ULID);
      const again = await runtime.create({
        image: BUSYBOX,
        volumes: [{ managedVolume: volume!.id, guestPath: '/v' }],
      });
      assert.equal((await run(again, 'cat', ['/v/f'])).stdout, 'kept');
      await assert.rejects(runtime.volumes.remove(name('vol')), /mounted by box/);
      await runtime.remove(again.id, true);
      await runtime.volumes.remove(name('vol'));
      assert.equal(await runtime.volumes.get(volume!.id), null);
    });

    it('exec streams: lines, null at the end, each stream once, args, env, exit code', async () => {
      const box = await runtime.create(
        { image: BUSYBOX, env: [{ key: 'A', value: 'box' }] },
        name('streams'),
      );
      const execution = await box.exec(
        'sh',
        ['-c', 'printf "one\\ntwö\\nlast"; echo "$A $B $1" >&2; exit 42', 'sh', 'arg 1'],
        { B: 'exec' },
      );
      assert.ok(execution instanceof JsExecution);
      assert.match(await execution.id(), ULID);
      const stdout = await execution.stdout();
      const stderr = await execution.stderr();
      assert.equal(await stdout.next(), 'one');
      assert.equal(await stdout.next(), 'twö');
      assert.equal(await stdout.next(), 'last');
      assert.equal(await stdout.next(), null);
      assert.equal(await stdout.next(), null);
      assert.equal(await stderr.next(), 'box exec arg 1');
      assert.equal(await stderr.next(), null);
      assert.deepEqual(await execution.wait(), { exitCode: 42 });
      await assert.rejects(
        execution.stdout(),
        (e: unknown) => e instanceof BoxError && /already taken/.test(e.message),
      );
      const missing = await box.exec('/no/such/binary');
      assert.notEqual((await missing.wait()).exitCode, 0);
      await assert.rejects(box.exec(''), (e: unknown) => e instanceof BoxError && e.field === 'cmd');
      // Arguments are checked once, by the handle, with the same field named on both runtimes.
      await assert.rejects(
        box.exec('true', [], { 'A=B': 'x' }),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === 'env',
      );
      await assert.rejects(
        box.exec('true', [], undefined, false, undefined, undefined, 'relative'),
        (e: unknown) => e instanceof BoxError && e.field === 'cwd',
      );
      await assert.rejects(
        box.setTimeout(-1),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === 'timeoutMs',
      );
    });

    it('stdin reaches the command; stdout and stderr never deadlock (2 MB on stderr, stdout read first)', async () => {
      const box = (await runtime.get(name('streams')))!;
      const cat = await box.exec('sh', ['-c', 'read line; echo "got $line"; cat']);
      const stdin = await cat.stdin();
      await stdin.writeString('ping\n');
      await stdin.write(Buffer.from('rest\n'));
      await stdin.close();
      const out = await cat.stdout();
      assert.equal(await out.next(), 'got ping');
      assert.equal(await out.next(), 'rest');
      assert.equal(await out.next(), null);
      assert.equal((await cat.wait()).exitCode, 0);

      const burst = await box.exec('sh', [
        '-c',
        'head -c 2097152 /dev/zero | tr "\\0" x | fold -w 1000 >&2; echo done',
      ]);
      const stdout = await burst.stdout();
      assert.equal(await stdout.next(), 'done');
      assert.equal(await stdout.next(), null);
      assert.equal((await burst.wait()).exitCode, 0);
      const stderr = await burst.stderr();
      let lines = 0;
      while ((await stderr.next()) !== null) lines++;
      assert.equal(lines, 2098); // 2097152 bytes folded at 1000 columns; the last line unterminated
    });

    it('kill() ends a command with SIGKILL (137); wait() resolves for every waiter', async () => {
      const box = (await runtime.get(name('streams')))!;
      const execution = await box.exec('sleep', ['30']);
      await execution.kill();
      const [a, b] = await Promise.all([execution.wait(), execution.wait()]);
      assert.deepEqual(a, { exitCode: 137 });
      assert.deepEqual(b, { exitCode: 137 });
    });

    it('box and runtime metrics count commands, errors and bytes', async () => {
      const before = await runtime.metrics();
      const box = await runtime.create({ image: BUSYBOX }, name('metrics'));
      await run(box, 'true');
      const execution = await box.exec('sh', ['-c', 'read x; echo 12345; exit 3']);
      await (await execution.stdin()).writeString('abc\n');
      await execution.wait();
      const bm = await box.metrics();
      assert.equal(bm.commandsExecutedTotal, 2);
      assert.equal(bm.execErrorsTotal, 1);
      assert.equal(bm.bytesSentTotal, 4);
      assert.equal(bm.bytesReceivedTotal, 6);
      assert.ok(typeof bm.memoryBytes === 'number' && bm.memoryBytes > 0);
      assert.ok(typeof bm.totalCreateDurationMs === 'number' && bm.totalCreateDurationMs > 0);
      assert.ok(typeof bm.stageBoxSpawnMs === 'number');
      const m = await runtime.metrics();
      assert.equal(m.boxesCreatedTotal, before.boxesCreatedTotal + 1);
      assert.equal(m.totalCommandsExecuted, before.totalCommandsExecuted + 2);
      assert.equal(m.totalExecErrors, before.totalExecErrors + 1);
      assert.ok(m.numRunningBoxes >= 1);
      await runtime.remove(box.id, true);
    });

    it('stop, exec on a stopped box, remove with and without force, autoRemove', async () => {
      const box = await runtime.create({ image: BUSYBOX }, name('stoppable'));
      await assert.rejects(
        runtime.remove(name('stoppable')),
        (e: unknown) => e instanceof BoxError && /stop it first/.test(e.message),
      );
      await box.stop();
      const info = await box.info();
      assert.deepEqual(info.state, { status: 'stopped', running: false });
      await assert.rejects(box.exec('true'), /not running/);
      await box.stop();
      await runtime.remove(name('stoppable'));
      assert.equal(await runtime.getInfo(name('stoppable')), null);
      await assert.rejects(box.info(), /no longer exists/);
      await assert.rejects(
        runtime.remove(name('stoppable')),
        (e: unknown) => e instanceof BoxError && /no box/.test(e.message),
      );

      const auto = await runtime.create({ image: BUSYBOX, autoRemove: true }, name('auto'));
      await auto.stop();
      assert.equal(await runtime.getInfo(auto.id), null);
    });

    it('rejects invalid options with a BoxError naming the field (spec rejections 1–3), leaving nothing', async () => {
      const count = (await runtime.listInfo()).length;
      const cases: [unknown, string][] = [
        [
          { image: BUSYBOX, volumes: [{ managedVolume: 'v', hostPath: '/tmp', guestPath: '/x' }] },
          'volumes[0]',
        ],
        [{ image: BUSYBOX, volumes: [{ guestPath: '/x' }] }, 'volumes[0]'],
        [
          { image: BUSYBOX, volumes: [{ managedVolume: 'v', guestPath: '/x', readOnly: true }] },
          'volumes[0].readOnly',
        ],
        [{ image: BUSYBOX, ports: [{ guestPort: 53, protocol: 'udp' }] }, 'ports[0].protocol'],
        [{ image: BUSYBOX, memoryMib: 0 }, 'memoryMib'],
      ];
      // A host path is checked where the boxes run: the local runtime refuses a missing one by name.
      if (target.kind === 'local') {
        cases.push([
          { image: BUSYBOX, volumes: [{ hostPath: '/no/such/dir', guestPath: '/x' }] },
          'volumes[0].hostPath',
        ]);
      }
      for (const [options, field] of cases) {
        await assert.rejects(
          runtime.create(options as never),
          (error: unknown) =>
            error instanceof BoxError && error.field === field && error.message.includes(field),
          field,
        );
      }
      await runtime.create({ image: BUSYBOX }, name('unique'));
      await assert.rejects(
        runtime.create({ image: BUSYBOX }, name('unique')),
        (error: unknown) =>
          error instanceof BoxError && error.field === 'name' && /already exists/.test(error.message),
      );
      await assert.rejects(
        runtime.create({ image: BUSYBOX }, 'bad name!'),
        (e: unknown) => e instanceof BoxError && e.field === 'name',
      );
      await runtime.remove(name('unique'), true);
      assert.equal((await runtime.listInfo()).length, count);
    });

    it('SimpleBox: lazy start, variadic and array exec with env/cwd/user, timeoutSecs, autoRemove on stop', async () => {
      const box = new SimpleBox({
        image: BUSYBOX,
        runtime,
        name: name('simple'),
        env: { BOX_VAR: 'from-box' },
      });
      assert.throws(() => box.id, /not started/);
      assert.equal(await runtime.getInfo(name('simple')), null);
      assert.deepEqual(await box.exec('echo', 'a', 'b c'), { exitCode: 0, stdout: 'a b c\n', stderr: '' });
      const r = await box.exec(
        'sh',
        ['-c', 'echo "$BOX_VAR $CMD_VAR"; pwd; id -u; echo bad >&2; exit 5'],
        { CMD_VAR: 'cmd' },
        { cwd: '/tmp', user: '65534' },
      );
      assert.deepEqual(r, { exitCode: 5, stdout: 'from-box cmd\n/tmp\n65534\n', stderr: 'bad\n' });
      await assert.rejects(
        box.exec('sleep', ['30'], undefined, { timeoutSecs: 0.3 }),
        (e: unknown) => e instanceof TimeoutError,
      );
      assert.equal((await box.exec('echo', 'still here')).stdout, 'still here\n');
      assert.equal((await box.getInfo()).state.running, true);
      await box.stop();
      assert.equal(await runtime.getInfo(name('simple')), null, 'autoRemove defaults to true');
    });

    it('CodeBox runs Python on python:slim; failures are ExecError with the traceback', async () => {
      await using code = new CodeBox({ runtime, name: name('code') });
      assert.equal(await code.run('print(6 * 7)'), '42\n');
      assert.equal((await code.getInfo()).image, 'python:slim');
      await assert.rejects(
        code.run('1/0'),
        (e: unknown) => e instanceof ExecError && e.exitCode === 1 && /ZeroDivisionError/.test(e.stderr),
      );
    });

    it('warm pool: create() with its options hands out a ready box, the pool refills, close() removes the rest', async () => {
      const options = { network: { mode: 'disabled' as const }, memoryMib: 96 };
      assert.throws(
        () => runtime.pool({ image: BUSYBOX, size: 0, options }),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === 'size',
      );
      const pool = runtime.pool({ image: BUSYBOX, size: 1, options });
      await pool.filled();
      assert.equal(pool.ready(), 1);
      const listed = (await runtime.listInfo()).length;
      const asked = Date.now();
      const box = await runtime.create({ image: BUSYBOX, ...options }, name('pooled'));
      const info = await box.info();
      assert.ok(Date.parse(info.createdAt) < asked, 'the box was started before create() was called');
      assert.equal(info.name, name('pooled'));
      assert.equal(info.memoryMib, 96);
      assert.equal((await run(box, 'echo', ['warm'])).stdout, 'warm');
      assert.equal((await runtime.listInfo()).length, listed + 1, 'only the handed-out box is listed');
      await pool.filled();
      assert.equal(pool.ready(), 1, 'refilled');
      await pool.close();
      assert.equal(pool.ready(), 0);
      const closed = Date.now();
      const cold = await runtime.create({ image: BUSYBOX, ...options }, name('unpooled'));
      assert.ok(Date.parse((await cold.info()).createdAt) >= closed - 5, 'a closed pool hands out nothing');
      await runtime.remove(cold.id, true);
      await runtime.remove(box.id, true);
    });
  });
}
