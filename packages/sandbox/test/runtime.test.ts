/**
 * `JsRuntime` and `JsBox` against real boxes from the local registry (spec 002 "Runtime", "Box handle",
 * "JsBoxOptions", "JsBoxInfo", "JsRuntimeMetrics", "JsBoxMetrics", rejections at creation). The spec
 * defaults and invalid options are checked in the shared suite (rest-suite.ts), which runs on the local
 * runtime too.
 */
import assert from 'node:assert/strict';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BoxError, type JsRuntime } from '../src/index.ts';
// internal: the state database is read directly
import { StateDb } from '../src/runtime/state.ts';
import {
  BUSYBOX,
  boxDirs,
  cleanupAll,
  ensureRegistry,
  run,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe('JsRuntime with real boxes', () => {
  let home: string;
  let runtime: JsRuntime;

  before(() => {
    ensureRegistry();
    home = tempHome();
    runtime = testRuntime(home);
  });

  after(async () => {
    for (const info of await runtime.listInfo()) await runtime.remove(info.id, true);
  });

  it('applies cpus, memoryMib, workingDir, env, hostPath volumes (rw and ro) and capabilities', async () => {
    const hostDir = tempHome('sandbox-bind-');
    writeFileSync(join(hostDir, 'in.txt'), 'from host\n');
    const roDir = tempHome('sandbox-ro-');
    const box = await runtime.create({
      image: BUSYBOX,
      cpus: 0.5,
      memoryMib: 128,
      workingDir: '/tmp',
      env: [
        { key: 'GREETING', value: 'hello box' },
        { key: 'PATH', value: '/bin:/usr/bin' },
      ],
      volumes: [
        { hostPath: hostDir, guestPath: '/data' },
        { hostPath: roDir, guestPath: '/ro', readOnly: true },
      ],
      advanced: { capabilities: { drop: ['CHOWN'] } },
    });
    const info = await box.info();
    assert.equal(info.cpus, 0.5);
    assert.equal(info.memoryMib, 128);
    const r = await run(box, 'sh', [
      '-c',
      'pwd; echo "$GREETING"; echo $PATH; cat /data/in.txt; echo out > /data/out.txt',
    ]);
    assert.equal(r.stdout, '/tmp\nhello box\n/bin:/usr/bin\nfrom host');
    assert.equal(readFileSync(join(hostDir, 'out.txt'), 'utf8'), 'out\n');
    const ro = await run(box, 'sh', ['-c', 'echo x > /ro/x']);
    assert.notEqual(ro.exitCode, 0);
    assert.match(ro.stderr, /Read-only file system/);
    assert.equal(existsSync(join(roDir, 'x')), false);
    // CAP_CHOWN dropped: chown fails even for root.
    const chown = await run(box, 'sh', ['-c', 'touch /tmp/f && chown 1234 /tmp/f']);
    assert.notEqual(chown.exitCode, 0);
    assert.match(chown.stderr, /not permitted/);
    // Memory limit as the kernel sees it for the box's init process.
    const pid = info.state.pid!;
    const cgroup = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
    const memPath = /:memory:(.*)$/m.exec(cgroup)?.[1];
    if (memPath) {
      const limit = Number(readFileSync(`/sys/fs/cgroup/memory${memPath}/memory.limit_in_bytes`, 'utf8'));
      assert.equal(limit, 128 * 1024 * 1024);
    }
    await runtime.remove(box.id, true);
  });

  it('per-exec env and arguments, exit codes and stderr', async () => {
    const box = await runtime.create({ image: BUSYBOX, env: [{ key: 'A', value: 'box' }] });
    const r = await run(box, 'sh', ['-c', 'echo "$A $B $1"; echo oops >&2; exit 42', 'sh', 'arg 1'], {
      B: 'exec',
    });
    assert.deepEqual(r, { exitCode: 42, stdout: 'box exec arg 1', stderr: 'oops' });
    const missing = await box.exec('/no/such/binary');
    assert.notEqual((await missing.wait()).exitCode, 0);
    await runtime.remove(box.id, true);
  });

  it('network disabled leaves only the loopback interface', async () => {
    const box = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
    const r = await run(box, 'sh', ['-c', "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"]);
    assert.equal(r.stdout, 'lo');
    const info = await box.info();
    assert.equal(info.network?.outbound.mode, 'disabled');
    assert.equal(info.network?.mode, 'disabled');
    await runtime.remove(box.id, true);
  });

  it('diskSizeGb limits the writable layer', async () => {
    const box = await runtime.create({ image: BUSYBOX, diskSizeGb: 0.05 });
    const r = await run(box, 'sh', ['-c', 'dd if=/dev/zero of=/big bs=1M count=80 2>&1; echo rc=$?']);
    assert.match(r.stdout, /No space left on device/);
    assert.match(r.stdout, /rc=1/);
    await runtime.remove(box.id, true);
  });

  it('managed volumes: created by name, shared between boxes, resolved by id', async () => {
    const a = await runtime.create({
      image: BUSYBOX,
      volumes: [{ managedVolume: 'shared', guestPath: '/vol' }],
    });
    assert.equal((await run(a, 'sh', ['-c', 'echo persisted > /vol/f'])).exitCode, 0);
    await runtime.remove(a.id, true);
    const volume = await runtime.volumes.get('shared');
    assert.ok(volume);
    assert.match(volume.id, ULID);
    const b = await runtime.create({
      image: BUSYBOX,
      volumes: [{ managedVolume: volume.id, guestPath: '/v2', readOnly: false }],
    });
    assert.equal((await run(b, 'cat', ['/v2/f'])).stdout, 'persisted');
    await assert.rejects(runtime.volumes.remove('shared'), /mounted by box/);
    await runtime.remove(b.id, true);
    await runtime.volumes.remove('shared');
    assert.equal(await runtime.volumes.get(volume.id), null);
  });

  it('starts a box from a prepared rootfs directory', async () => {
    const rootfs = tempHome('sandbox-rootfs-');
    mkdirSync(join(rootfs, 'bin'));
    mkdirSync(join(rootfs, 'root'));
    copyFileSync('/bin/busybox', join(rootfs, 'bin', 'busybox'));
    chmodSync(join(rootfs, 'bin', 'busybox'), 0o755);
    symlinkSync('busybox', join(rootfs, 'bin', 'sh'));
    const box = await runtime.create({ rootfsPath: rootfs });
    assert.equal((await box.info()).image, rootfs);
    assert.equal((await run(box, '/bin/sh', ['-c', 'echo from rootfs'])).stdout, 'from rootfs');
    await runtime.remove(box.id, true);
  });

  it('a missing image fails with a BoxError naming it, counted in boxesFailedTotal, with no row left', async () => {
    const failed = (await runtime.metrics()).boxesFailedTotal;
    await assert.rejects(runtime.create({ image: '127.0.0.1:5000/no/such-image:1' }), (error: unknown) => {
      return error instanceof BoxError && /no\/such-image/.test(error.message);
    });
    assert.equal((await runtime.metrics()).boxesFailedTotal, failed + 1);
    assert.ok((await runtime.listInfo()).every((i) => !i.image.includes('such-image')));
    assert.equal(boxDirs(home).length, (await runtime.listInfo()).length);
  });

  it('stop, exec on a stopped box, remove with and without force, autoRemove', async () => {
    const box = await runtime.create({ image: BUSYBOX }, 'stoppable');
    await assert.rejects(runtime.remove('stoppable'), /running; stop it first/);
    await box.stop();
    const info = await box.info();
    assert.equal(info.state.status, 'stopped');
    assert.equal(info.state.running, false);
    assert.equal(info.state.pid, undefined);
    await assert.rejects(box.exec('true'), /stopped, not running/);
    await box.stop(); // idempotent
    await runtime.remove('stoppable');
    assert.equal(await runtime.getInfo('stoppable'), null);
    assert.equal(existsSync(join(home, 'boxes', box.id)), false);

    const auto = await runtime.create({ image: BUSYBOX, autoRemove: true });
    await auto.stop();
    assert.equal(await runtime.getInfo(auto.id), null);
    await assert.rejects(runtime.remove(auto.id), /no box/);
  });

  it('tty allocates a terminal; wait() ends even when a background process keeps the pipes open', async () => {
    const box = await runtime.create({ image: BUSYBOX });
    const tty = await run(box, 'sh', ['-c', 'test -t 1 && echo terminal'], undefined, true);
    assert.equal(tty.stdout, 'terminal\r');
    assert.equal(tty.exitCode, 0);
    const plain = await run(box, 'sh', ['-c', 'test -t 1 || echo pipe']);
    assert.equal(plain.stdout, 'pipe');
    const bg = await run(box, 'sh', ['-c', 'sleep 60 & echo started']);
    assert.deepEqual(bg, { exitCode: 0, stdout: 'started', stderr: '' });
    await runtime.remove(box.id, true);
  });

  it('a 10 MB stderr burst while only stdout is read does not hang the command', async () => {
    const box = await runtime.create({ image: BUSYBOX });
    const execution = await box.exec('sh', ['-c', 'head -c 10485760 /dev/zero >&2; echo finished']);
    const stdout = await execution.stdout();
    assert.equal(await stdout.next(), 'finished');
    assert.equal(await stdout.next(), null);
    assert.equal((await execution.wait()).exitCode, 0);
    assert.equal((await box.metrics()).bytesReceivedTotal, 10485760 + 9);
    await runtime.remove(box.id, true);
  });

  it('kill() ends a running command with SIGKILL', async () => {
    const box = await runtime.create({ image: BUSYBOX });
    const execution = await box.exec('sleep', ['30']);
    await execution.kill();
    assert.equal((await execution.wait()).exitCode, 137);
    await runtime.remove(box.id, true);
  });

  it('stdin of a command inside a box', async () => {
    const box = await runtime.create({ image: BUSYBOX });
    const execution = await box.exec('sh', ['-c', 'read line; echo "got $line"']);
    const stdin = await execution.stdin();
    await stdin.writeString('ping\n');
    const stdout = await execution.stdout();
    assert.equal(await stdout.next(), 'got ping');
    assert.equal((await execution.wait()).exitCode, 0);
    const metrics = await box.metrics();
    assert.equal(metrics.bytesSentTotal, 5);
    assert.equal(metrics.bytesReceivedTotal, 9);
    await runtime.remove(box.id, true);
  });

  it('reports runtime and box metrics with real stage timings', async () => {
    const rt = testRuntime(tempHome());
    const box = await rt.create({ image: BUSYBOX });
    await run(box, 'true');
    await run(box, 'sh', ['-c', 'echo 12345; exit 3']);
    const m = await rt.metrics();
    assert.deepEqual(m, {
      boxesCreatedTotal: 1,
      boxesFailedTotal: 0,
      numRunningBoxes: 1,
      totalCommandsExecuted: 2,
      totalExecErrors: 1,
    });
    const bm = await box.metrics();
    assert.equal(bm.commandsExecutedTotal, 2);
    assert.equal(bm.execErrorsTotal, 1);
    assert.equal(bm.bytesReceivedTotal, 6);
    assert.equal(bm.bytesSentTotal, 0);
    assert.ok(typeof bm.cpuPercent === 'number' && bm.cpuPercent >= 0 && bm.cpuPercent <= 100);
    assert.ok(typeof bm.memoryBytes === 'number' && bm.memoryBytes > 0);
    const stages = [
      bm.stageImagePrepareMs,
      bm.stageFilesystemSetupMs,
      bm.stageBoxConfigMs,
      bm.stageBoxSpawnMs,
      bm.stageContainerInitMs,
    ];
    for (const stage of stages) assert.ok(typeof stage === 'number' && stage >= 0, String(stage));
    const sum = stages.reduce((a, b) => a! + b!, 0)!;
    assert.ok(bm.totalCreateDurationMs! >= sum, `${bm.totalCreateDurationMs} >= ${sum}`);
    await rt.remove(box.id, true);
    assert.equal((await rt.metrics()).numRunningBoxes, 0);
  });

  it('creates, uses and removes 20 boxes concurrently with no state row or directory left', async () => {
    const rt = testRuntime(tempHome());
    const outputs = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const box = await rt.create({ image: BUSYBOX, memoryMib: 64 }, `c${i}`);
        const r = await run(box, 'sh', ['-c', `echo box-$(hostname)-${i}`]);
        await rt.remove(box.id, true);
        return r.stdout;
      }),
    );
    assert.deepEqual(
      outputs,
      Array.from({ length: 20 }, (_, i) => `box-c${i}-${i}`),
    );
    assert.deepEqual(await rt.listInfo(), []);
    assert.deepEqual(boxDirs(rt.homeDir), []);
    const db = new StateDb(rt.homeDir);
    assert.equal(db.listBoxes().length, 0);
    db.close();
    assert.equal((await rt.metrics()).boxesCreatedTotal, 20);
  });
});

after(cleanupAll);
