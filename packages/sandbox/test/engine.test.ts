/**
 * The OCI engine (src/engine) against real containers: lifecycle, exec stdio and exit codes,
 * env/hostname/workingDir/user, signals, stage timings, stats, listing and idempotent removal.
 * Runs as root with crun or runc installed (the package's test:setup installs them).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
// internal: the engine is tested as a unit
import { type EngineBoxSpec, mountsUnder, type OciEngine } from '../src/engine/index.ts';
import { BoxError } from '../src/index.ts';
import { collect, engineTestBed, execSh } from './helpers/engine.ts';

const bed = engineTestBed('engine-test-', 'eng', { env: ['PATH=/bin', 'HOME=/root'] });
const { spec } = bed;
const sh = (id: string, script: string, extra: Partial<Parameters<OciEngine['exec']>[1]> = {}) =>
  execSh(bed.engine, id, script, extra);

describe('engine lifecycle', () => {
  const s = spec({
    hostname: 'box-one',
    env: ['PATH=/bin', 'GREETING=hello world'],
    workingDir: '/work/dir',
  });

  test('start reports the init pid and the four stage timings', async () => {
    const started = await bed.engine.start(s);
    assert.ok(started.pid > 1);
    for (const k of [
      'stageFilesystemSetupMs',
      'stageBoxConfigMs',
      'stageBoxSpawnMs',
      'stageContainerInitMs',
    ] as const) {
      assert.equal(typeof started.timings[k], 'number', k);
      assert.ok(started.timings[k] >= 0, k);
    }
    assert.deepEqual(await bed.engine.state(s.id), { status: 'running', pid: started.pid });
    await assert.rejects(bed.engine.start(s), /already running/);
  });

  test('exec streams stdout and stderr separately and returns the exit code', async () => {
    const r = await sh(s.id, 'echo out; echo err >&2; exit 7');
    assert.deepEqual(r, { code: 7, stdout: 'out\n', stderr: 'err\n' });
  });

  test('hostname, env (box and per-command), working dir (created when missing)', async () => {
    const r = await sh(s.id, 'echo "$(hostname)|$GREETING|$EXTRA|$(pwd)"', { env: ['EXTRA=x=y'] });
    assert.equal(r.stdout, 'box-one|hello world|x=y|/work/dir\n');
    const cwd = await sh(s.id, 'pwd', { cwd: '/bin' });
    assert.equal(cwd.stdout, '/bin\n');
  });

  test('user by name and by uid:gid', async () => {
    assert.equal((await sh(s.id, 'id -u; id -g', { user: 'nobody' })).stdout, '65534\n65534\n');
    assert.equal((await sh(s.id, 'id -u; id -g', { user: '1234:5678' })).stdout, '1234\n5678\n');
    await assert.rejects(
      bed.engine.exec(s.id, { cmd: 'id', args: [], env: [], user: 'nosuchuser' }),
      (e: Error) => {
        return e instanceof BoxError && /user: user 'nosuchuser'/.test(e.message);
      },
    );
    // The group by name from the image's /etc/group (root is gid 0 there), not the user's own (65534).
    assert.equal((await sh(s.id, 'id -u; id -g', { user: 'nobody:root' })).stdout, '65534\n0\n');
    await assert.rejects(
      bed.engine.exec(s.id, { cmd: 'id', args: [], env: [], user: 'nobody:nosuchgroup' }),
      (e: unknown) =>
        e instanceof BoxError &&
        e.field === 'user' &&
        /group 'nosuchgroup' is not in the image's \/etc\/group/.test(e.message),
    );
  });

  test('stdin is piped to the command', async () => {
    const p = await bed.engine.exec(s.id, { cmd: 'tr', args: ['a-z', 'A-Z'], env: [] });
    p.stdin.end('shout\n');
    assert.deepEqual(await collect(p), { code: 0, stdout: 'SHOUT\n', stderr: '' });
  });

  test('kill delivers the signal to the command (TERM → 143, default KILL → 137)', async () => {
    const a = await bed.engine.exec(s.id, { cmd: 'sleep', args: ['100'], env: [] });
    await a.kill('SIGTERM');
    assert.equal((await collect(a)).code, 143);
    const b = await bed.engine.exec(s.id, { cmd: 'sleep', args: ['100'], env: [] });
    await b.kill();
    assert.equal((await collect(b)).code, 137);
  });

  test('10 MB on stderr while the caller reads only stdout does not deadlock', async () => {
    const p = await bed.engine.exec(s.id, {
      cmd: 'sh',
      args: ['-c', 'dd if=/dev/zero bs=1048576 count=10 >&2 2>/dev/null; echo done'],
      env: [],
    });
    const chunks: Buffer[] = [];
    for await (const c of p.stdout) chunks.push(c as Buffer);
    assert.equal(Buffer.concat(chunks).toString(), 'done\n');
    assert.equal(await p.exited, 0);
    let n = 0;
    for await (const c of p.stderr) n += (c as Buffer).length;
    assert.equal(n, 10 * 1048576);
  });

  test('tty: the command sees a terminal, resized on request', async () => {
    const p = await bed.engine.exec(s.id, {
      cmd: 'sh',
      args: ['-c', 'test -t 0 && test -t 1 && echo is-a-tty; read line; stty size'],
      env: [],
      tty: true,
    });
    assert.ok(p.resize);
    await p.resize(120, 40);
    p.stdin.write('go\n');
    const r = await collect(p);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /is-a-tty/);
    assert.match(r.stdout, /40 120/);
  });

  test('tty: ttySize gives the terminal its size before the command starts', async () => {
    const p = await bed.engine.exec(s.id, {
      cmd: 'stty',
      args: ['size'],
      env: [],
      tty: true,
      ttySize: { cols: 100, rows: 30 },
    });
    const r = await collect(p);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /\b30 100\r?\n/);
    await assert.rejects(
      bed.engine.exec(s.id, { cmd: 'true', args: [], env: [], tty: true, ttySize: { cols: 0, rows: 30 } }),
      /ttySize/,
    );
  });

  test('tty under load: every command sees its size at once and its output arrives undecorated', async () => {
    // crun's own `exec --tty` failed both under concurrency: the size came after the command had
    // started ("stty: standard input"), and a short command's output could come back wrapped in
    // crun's red timestamped error format.
    const results = await Promise.all(
      Array.from({ length: 12 }, async (_, i) =>
        collect(
          await bed.engine.exec(s.id, {
            cmd: 'sh',
            args: ['-c', `stty size; echo out-${i}`],
            env: [],
            tty: true,
            ttySize: { cols: 100 + i, rows: 30 },
          }),
        ),
      ),
    );
    results.forEach((r, i) => {
      assert.equal(r.code, 0);
      assert.equal(r.stdout, `30 ${100 + i}\r\nout-${i}\r\n`);
    });
  });

  test('tty: the terminal is one of the box, owned by the command (tty, /dev/tty, Ctrl-C)', async () => {
    const p = await bed.engine.exec(s.id, {
      cmd: 'sh',
      args: ['-c', 'tty; echo via-dev-tty > /dev/tty; sleep 30; echo not-interrupted'],
      env: [],
      tty: true,
      user: '1000',
    });
    let out = '';
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('via-dev-tty')) p.stdin.write('\x03');
    });
    const code = await p.exited;
    assert.match(out, /^\/dev\/pts\/\d+\r\n/);
    assert.doesNotMatch(out, /not-interrupted/);
    assert.equal(code, 130, 'Ctrl-C on the terminal interrupts the command');
    // A command not on PATH is reported as such.
    const missing = await collect(
      await bed.engine.exec(s.id, { cmd: 'no-such-command', args: [], env: [], tty: true }),
    );
    assert.notEqual(missing.code, 0);
    assert.match(missing.stdout + missing.stderr, /no-such-command/);
  });

  test('stats reads memory and cpu from the cgroup', async () => {
    await sh(s.id, 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done');
    const st = await bed.engine.stats(s.id);
    assert.ok((st.memoryBytes ?? 0) > 0);
    assert.ok(st.cpuPercent !== undefined && st.cpuPercent >= 0 && st.cpuPercent <= 100);
    assert.equal(st.networkBytesSent, 0);
  });

  test('list shows the box with its mounted root and disk', async () => {
    const rec = (await bed.engine.list()).find((b) => b.id === s.id);
    assert.ok(rec);
    assert.equal(rec.status, 'running');
    assert.equal(rec.boxDir, s.boxDir);
    assert.deepEqual(rec.mounts, [join(s.boxDir, 'rootfs'), join(s.boxDir, 'disk')]);
  });

  test('stop unmounts; a restart keeps the writable layer; remove is idempotent', async () => {
    await sh(s.id, 'echo kept > /root/file');
    await bed.engine.stop(s.id, 500);
    assert.equal((await bed.engine.state(s.id)).status, 'stopped');
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await assert.rejects(bed.engine.exec(s.id, { cmd: 'true', args: [], env: [] }), /not running/);
    await bed.engine.stop(s.id);
    await bed.engine.start(s);
    assert.equal((await sh(s.id, 'cat /root/file')).stdout, 'kept\n');
    await bed.engine.remove(s.id, s.boxDir);
    await bed.engine.remove(s.id, s.boxDir);
    assert.equal((await bed.engine.state(s.id)).status, 'unknown');
    assert.deepEqual(mountsUnder(s.boxDir), []);
    assert.equal(
      (await bed.engine.list()).some((b) => b.id === s.id),
      false,
    );
  });
});

describe('engine input validation', () => {
  test('bad specs are rejected naming the field, before anything is created', async () => {
    const cases: [Partial<EngineBoxSpec>, RegExp][] = [
      [{ cpus: 0 }, /^cpus:/],
      [{ memoryMib: 1.5 }, /^memoryMib:/],
      [{ workingDir: 'rel' }, /^workingDir:/],
      [{ diskSizeGb: -1 }, /^diskSizeGb:/],
      [{ mounts: [{ hostPath: 'rel', guestPath: '/x', readOnly: true }] }, /^mounts\[0\]\.hostPath:/],
      [{ capabilities: { add: ['NOT_A_CAP'], drop: [] } }, /^advanced\.capabilities\.add:/],
      [{ id: '../evil' }, /^id:/],
    ];
    for (const [o, re] of cases) {
      const s = spec(o.id ? {} : o);
      const bad = { ...s, ...o };
      await assert.rejects(
        bed.engine.start(bad),
        (e: Error) => e instanceof BoxError && re.test(e.message),
        re.source,
      );
      assert.deepEqual(mountsUnder(s.boxDir), []);
    }
  });

  test('operations on an unknown box', async () => {
    assert.deepEqual(await bed.engine.state('nosuchbox'), { status: 'unknown' });
    await assert.rejects(bed.engine.exec('nosuchbox', { cmd: 'true', args: [], env: [] }), /not running/);
    assert.deepEqual(await bed.engine.stats('nosuchbox'), {});
  });
});
