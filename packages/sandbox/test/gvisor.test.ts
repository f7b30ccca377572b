/**
 * The gVisor isolation tier (src/engine/gvisor*.ts) at the engine level: platform choice (the KVM
 * probe never hangs), the gVisor config, the runsc launcher (cgroup, `/proc/sys` view, namespace file),
 * boxes of both tiers side by side in one `TieredEngine`,
 * exec streams, exit codes, kill, graceful stop, limits applied to the sandbox's cgroup, stats,
 * volumes, refusals, and nothing left behind. Skipped only when runsc is not installed (the
 * package's `test:setup` installs it).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
// internal: the gVisor engine is tested as a unit
import { findExecutable } from '../src/engine/engine.ts';
// internal: the gVisor engine is tested as a unit
import { gvisorOciConfig, SENTRY_TASKS } from '../src/engine/gvisor.ts';
// internal: the gVisor engine is tested as a unit
import { installRunscLauncher, openStartGate } from '../src/engine/gvisor-launcher.ts';
// internal: the gVisor engine is tested as a unit
import { chooseGVisorPlatform, probeKvm } from '../src/engine/gvisor-platform.ts';
// internal: the gVisor engine is tested as a unit
import { createTieredEngine, type TieredEngine } from '../src/engine/gvisor-tiers.ts';
// internal: the gVisor engine is tested as a unit
import { boxCgroupDirs } from '../src/engine/gvisor-userns.ts';
// internal: the gVisor engine is tested as a unit
import { makeBusyboxRootfs, mountsUnder } from '../src/engine/index.ts';
import { collect, execSh, specFactory } from './helpers/engine.ts';

const runsc = findExecutable('runsc');
const skip = runsc ? false : 'runsc is not installed (npm run test:setup -w @seed/sandbox installs it)';

const tmp = mkdtempSync(join(tmpdir(), 'gvisor-'));
const stateRoot = join(tmp, 'state');
const rootfs = makeBusyboxRootfs(join(tmp, 'layer0'));
const spec = specFactory(tmp, rootfs, 'gv', { isolation: 'gvisor' });
let engine: TieredEngine;

/**
 * Whether process `pid` has ended: gone from /proc, or a zombie or dead task. One read: a process reaped
 * between an existence check and the read would otherwise throw ENOENT.
 */
function processGone(pid: number): boolean {
  try {
    return /\) [ZX] /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}

function sh(id: string, script: string, extra = {}) {
  return execSh(engine as never, id, script, extra);
}

before(async () => {
  if (skip) return;
  // ptrace is given explicitly here (the probe has its own test), so this file never waits for KVM.
  engine = await createTieredEngine({ stateRoot, gvisorPlatform: 'ptrace' });
});

after(async () => {
  for (const box of (await engine?.list().catch(() => [])) ?? []) {
    await engine.remove(box.id, box.boxDir ?? join(tmp, 'boxes', box.id)).catch(() => {});
  }
  rmSync(tmp, { recursive: true, force: true });
});

describe('gVisor platform', { skip }, () => {
  test('the KVM probe ends within its timeout, whatever KVM does, and leaves no process', async () => {
    const scratch = join(tmp, 'probe');
    mkdirSync(scratch, { recursive: true });
    const t0 = performance.now();
    const result = await probeKvm(runsc!, scratch, 1500);
    assert.ok(performance.now() - t0 < 5000, 'probe returned');
    assert.ok(['booted', 'failed', 'timeout'].includes(result));
    // Its private --root is gone and no process names it.
    assert.deepEqual(readdirSync(scratch), []);
    const leftovers = readdirSync('/proc').filter((pid) => {
      try {
        return /^\d+$/.test(pid) && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(scratch);
      } catch {
        return false;
      }
    });
    assert.deepEqual(leftovers, []);
  });

  test('the choice is cached per boot with its reason; an explicit platform wins', async () => {
    const dir = join(tmp, 'choice');
    mkdirSync(dir, { recursive: true });
    const first = await chooseGVisorPlatform(runsc!, dir);
    assert.ok(first.platform === 'ptrace' || first.platform === 'kvm');
    assert.match(first.reason, /kvm|\/dev\/kvm|configured/);
    if (existsSync('/dev/kvm') && !process.env.SEED_SANDBOX_GVISOR_PLATFORM) {
      const cached = JSON.parse(readFileSync(join(dir, 'runsc-platform.json'), 'utf8'));
      assert.equal(cached.platform, first.platform);
      const t0 = performance.now();
      assert.deepEqual(await chooseGVisorPlatform(runsc!, dir), first);
      assert.ok(performance.now() - t0 < 500, 'second choice comes from the cache, not a new probe');
    }
    assert.deepEqual(await chooseGVisorPlatform(runsc!, dir, 'ptrace'), {
      platform: 'ptrace',
      reason: 'configured',
    });
    await assert.rejects(
      chooseGVisorPlatform(runsc!, dir, 'xen' as never),
      /gvisorPlatform: 'xen' must be 'ptrace' or 'kvm'/,
    );
  });
});

describe('gVisor config', () => {
  test('no seccomp section, no cgroupfs mount, host pids limit with the Sentry headroom', () => {
    const s = spec({ pidsLimit: 50 });
    const config = gvisorOciConfig(s, {
      rootfs: '/r',
      init: '/i',
      initArgs: ['-P'],
      cgroupsPath: '/seed-sandbox/x',
    });
    const linux = config.linux as Record<string, { pids?: { limit: number } } | undefined>;
    assert.equal(linux.seccomp, undefined);
    assert.equal(linux.resources?.pids?.limit, 100 + SENTRY_TASKS);
    const mounts = (config.mounts as { destination: string }[]).map((m) => m.destination);
    assert.ok(!mounts.includes('/sys/fs/cgroup'));
    assert.ok(mounts.includes('/proc') && mounts.includes('/.sandbox/init'));
  });
});

describe('gVisor launcher (runsc-launch.pl)', { skip }, () => {
  const perl = findExecutable('perl');
  const bin = join(tmp, 'launcher-bin');
  const launch = (args: string[], env: Record<string, string>) => {
    mkdirSync(bin, { recursive: true });
    const [perlPath, script] = installRunscLauncher(bin, perl!);
    return spawnSync(perlPath!, [script!, ...args], { env: { ...process.env, ...env }, encoding: 'utf8' });
  };
  /** A network namespace kept as an nsfs bind mount on a fresh file, as the engine makes for a box. */
  const netnsFile = (name: string) => {
    const file = join(tmp, name);
    writeFileSync(file, '');
    assert.equal(spawnSync('unshare', [`--net=${file}`, 'true']).status, 0);
    assert.deepEqual(mountsUnder(file), [file]);
    return file;
  };

  test('run: the command runs in the box cgroup with its limits and a /proc/sys without net; the netns file goes after success only; the host is untouched', () => {
    const id = `gvlaunch${process.pid}`;
    const limits = {
      SB_CG_ID: id,
      SB_CG_MEM: String(64 * 1024 * 1024),
      SB_CG_CPU: '50000 100000',
      SB_CG_PIDS: '77',
    };
    const probe = [
      'cat /proc/self/cgroup',
      'test -e /proc/sys/net && echo net-visible || echo net-hidden',
      'echo mmap=$(cat /proc/sys/vm/mmap_min_addr)',
      'test -r /proc/sys/.proc/self/status && echo proc-clone',
      'exit $EXIT',
    ].join('; ');
    // The "runsc command line": a shell whose arguments carry the runsc words the launcher reads.
    const argv = (exit: number) => [
      '/bin/sh',
      '-c',
      `EXIT=${exit}; ${probe}`,
      'sh',
      '--network=sandbox',
      'run',
      '--detach',
    ];
    const ok = netnsFile('launch-ok.netns');
    try {
      const r = launch(argv(0), { ...limits, SB_GV_NETNS: ok });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, new RegExp(`^\\d+:[^:\\n]*pids[^:\\n]*:/seed-sandbox/${id}$`, 'm'));
      assert.match(r.stdout, /^net-hidden$/m);
      assert.match(r.stdout, /^mmap=\d+$/m);
      assert.match(r.stdout, /^proc-clone$/m);
      const dirs = boxCgroupDirs(id);
      assert.ok(dirs.length > 0 && dirs.every((d) => existsSync(d)));
      const v2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
      const memory = v2
        ? join(dirs[0]!, 'memory.max')
        : `/sys/fs/cgroup/memory/seed-sandbox/${id}/memory.limit_in_bytes`;
      const pids = v2 ? join(dirs[0]!, 'pids.max') : `/sys/fs/cgroup/pids/seed-sandbox/${id}/pids.max`;
      assert.equal(readFileSync(memory, 'utf8').trim(), limits.SB_CG_MEM);
      assert.equal(readFileSync(pids, 'utf8').trim(), '77');
      // The sandbox holds the namespace after a successful run: its file is unmounted and removed.
      assert.equal(existsSync(ok), false);
      assert.deepEqual(mountsUnder(ok), []);
      // Nothing changed outside the launcher's mount namespace.
      assert.ok(existsSync('/proc/sys/net/core'));
      assert.ok(!readdirSync('/proc/sys').includes('.proc'));
      // delete --force runs the command, then removes the box's cgroup directories.
      const del = launch(['/bin/true', 'delete', '--force'], { SB_CG_ID: id });
      assert.equal(del.status, 0, del.stderr);
      assert.deepEqual(
        dirs.filter((d) => existsSync(d)),
        [],
      );
    } finally {
      spawnSync('umount', [ok]);
      for (const d of boxCgroupDirs(id)) rmSync(d, { recursive: false, force: true });
    }
    // A failed run keeps the namespace file (the engine's cleanup removes it) and passes the status on.
    const kept = netnsFile('launch-failed.netns');
    try {
      const r = launch(argv(3), { SB_GV_NETNS: kept });
      assert.equal(r.status, 3, r.stderr);
      assert.deepEqual(mountsUnder(kept), [kept]);
    } finally {
      spawnSync('umount', [kept]);
    }
  });

  test("run with a start gate: runsc reads the gate's answer from the FIFO (go; stop when the link failed), which goes afterwards", async () => {
    mkdirSync(bin, { recursive: true });
    const [perlPath, script] = installRunscLauncher(bin, perl!);
    const bundle = join(tmp, 'gate-bundle');
    mkdirSync(bundle, { recursive: true });
    const fifo = join(bundle, 'start-gate');
    const linkFails = () => sleep(50).then(() => Promise.reject(new Error('link failed')));
    for (const [ready, want] of [
      [() => sleep(50), 'go'],
      [linkFails, 'stop'],
    ] as const) {
      const gate = await openStartGate(ready());
      // The "runsc command line": a shell reading the FIFO as the prestart hook does.
      const child = spawn(
        perlPath!,
        [
          script!,
          '/bin/sh',
          '-c',
          'stat -c %a:%F "$0"; read -r go <"$0"; echo got=$go',
          fifo,
          'run',
          '--detach',
        ],
        {
          env: { ...process.env, SB_GV_GATE: gate.name, SB_GV_FIFO: fifo },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      let err = '';
      child.stdout?.on('data', (d) => {
        out += d;
      });
      child.stderr?.on('data', (d) => {
        err += d;
      });
      const code = await new Promise((resolve) => child.on('close', resolve));
      gate.close();
      assert.equal(code, 0, err);
      assert.equal(out, `600:fifo\ngot=${want}\n`);
      assert.equal(existsSync(fifo), false);
    }
  });
});

describe('gVisor boxes', { skip }, () => {
  test('a gVisor box and a container box side by side: each runs under its own kernel', async () => {
    const g = spec();
    const c = spec({ isolation: 'container' });
    await engine.start(g);
    await engine.start(c);
    const gv = await sh(g.id, 'cat /proc/version; dmesg | head -1');
    const ct = await sh(c.id, 'cat /proc/version');
    assert.equal(gv.code, 0, gv.stderr);
    assert.notEqual(gv.stdout.split('\n')[0], readFileSync('/proc/version', 'utf8').trim());
    assert.match(gv.stdout, /gVisor/i, 'the gVisor kernel log');
    assert.equal(ct.stdout.trim(), readFileSync('/proc/version', 'utf8').trim());
    assert.deepEqual(await engine.info(g.id), { tier: 'gvisor', runtime: 'runsc', platform: 'ptrace' });
    assert.equal((await engine.info(c.id)).tier, 'container');
    // A second engine on the same state root routes by the boxes' own records.
    const other = await createTieredEngine({ stateRoot, gvisorPlatform: 'ptrace' });
    assert.equal(other.tierOf(g.id), 'gvisor');
    assert.equal(other.tierOf(c.id), 'container');
    assert.equal((await execSh(other as never, g.id, 'echo routed')).stdout, 'routed\n');
    await engine.remove(c.id, c.boxDir);
    await engine.remove(g.id, g.boxDir);
  });

  test('exec: stdout, stderr, exit code, stdin, env, cwd, user; 255 when the command cannot start', async () => {
    const s = spec({ env: ['PATH=/bin', 'BOX=1'] });
    await engine.start(s);
    const r = await sh(s.id, 'echo out; echo err >&2; echo "$BOX $EXTRA $(pwd) $(id -u)"; exit 7', {
      env: ['EXTRA=2'],
      cwd: '/tmp',
      user: 'nobody',
    });
    assert.deepEqual(r, { code: 7, stdout: 'out\n1 2 /tmp 65534\n', stderr: 'err\n' });
    const cat = await engine.exec(s.id, { cmd: 'cat', args: [], env: [] });
    const big = Buffer.alloc(1024 * 1024, 'x');
    cat.stdin.end(big);
    const echoed = await collect(cat);
    assert.equal(echoed.code, 0);
    assert.equal(echoed.stdout.length, big.length);
    const missing = await collect(await engine.exec(s.id, { cmd: 'no-such-command', args: [], env: [] }));
    assert.equal(missing.code, 255);
    assert.match(missing.stderr, /no-such-command/);
    await assert.rejects(
      engine.exec(s.id, { cmd: 'sh', args: [], env: [], user: 'nosuchuser' }),
      /user 'nosuchuser'/,
    );
    await engine.remove(s.id, s.boxDir);
  });

  test('tty: a terminal of ttySize before the command starts, resized on request, Ctrl-C interrupts', async () => {
    const s = spec();
    await engine.start(s);
    const sized = await collect(
      await engine.exec(s.id, {
        cmd: 'sh',
        args: ['-c', 'test -t 0 && test -t 1 && echo is-a-tty; stty size'],
        env: [],
        tty: true,
        ttySize: { cols: 100, rows: 30 },
      }),
    );
    assert.equal(sized.code, 0);
    assert.equal(sized.stdout, 'is-a-tty\r\n30 100\r\n');
    // A resize reaches the command as SIGWINCH with the new size.
    const p = await engine.exec(s.id, {
      cmd: 'sh',
      args: ['-c', "trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.1; done"],
      env: [],
      tty: true,
    });
    assert.ok(p.resize);
    let out = '';
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    while (!out.includes('ready')) await sleep(20);
    await p.resize(120, 40);
    assert.equal(await p.exited, 0);
    assert.equal(out, 'ready\r\n40 120\r\n');
    // Ctrl-C on the terminal interrupts the command (as a user at a shell would).
    const c = await engine.exec(s.id, {
      cmd: 'sh',
      args: ['-c', 'echo waiting; sleep 30; echo not-interrupted'],
      env: [],
      tty: true,
      user: '1000',
    });
    let seen = '';
    c.stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes('waiting')) c.stdin.write('\x03');
    });
    assert.equal(await c.exited, 130);
    assert.doesNotMatch(seen, /not-interrupted/);
    await assert.rejects(
      engine.exec(s.id, { cmd: 'true', args: [], env: [], tty: true, ttySize: { cols: 0, rows: 30 } }),
      /ttySize/,
    );
    await engine.remove(s.id, s.boxDir);
  });

  test('kill ends the command (SIGKILL: 137; SIGTERM: 143) and the box keeps running', async () => {
    const s = spec();
    await engine.start(s);
    const p = await engine.exec(s.id, { cmd: 'sleep', args: ['600'], env: [] });
    await p.kill();
    assert.equal(await p.exited, 137);
    const t = await engine.exec(s.id, { cmd: 'sleep', args: ['600'], env: [] });
    await t.kill('SIGTERM');
    assert.equal(await t.exited, 143);
    assert.equal((await sh(s.id, 'echo alive')).stdout, 'alive\n');
    await engine.remove(s.id, s.boxDir);
  });

  test('stop: running commands get SIGTERM first, then the sandbox ends and its root is unmounted', async () => {
    const s = spec();
    const { pid } = await engine.start(s);
    const p = await engine.exec(s.id, {
      cmd: 'sh',
      args: ['-c', 'trap "echo got-term; exit 0" TERM; echo ready; while :; do sleep 0.1; done'],
      env: [],
    });
    let text = '';
    const ready = new Promise<void>((resolve) =>
      p.stdout.on('data', (chunk: Buffer) => {
        text += chunk;
        if (text.includes('ready')) resolve();
      }),
    );
    p.stderr.resume();
    await ready; // the trap is installed
    await engine.stop(s.id, 5000);
    assert.equal(await p.exited, 0);
    assert.match(text, /got-term/);
    assert.equal((await engine.state(s.id)).status, 'stopped');
    assert.ok(processGone(pid));
    assert.deepEqual(mountsUnder(s.boxDir), []);
    // The writable layer is kept: the box starts again with its files.
    await engine.start({ ...s });
    await engine.remove(s.id, s.boxDir);
    assert.equal((await engine.state(s.id)).status, 'unknown');
    assert.ok(!existsSync(join(stateRoot, 'boxes', s.id)));
  });

  test('limits: memory, CPU quota and pids are set on the sandbox cgroup; stats read it', async () => {
    const s = spec({ memoryMib: 96, cpus: 0.5, pidsLimit: 40 });
    const { pid } = await engine.start(s);
    const cgroup = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
    assert.match(cgroup, new RegExp(`seed-sandbox/${s.id}`));
    if (existsSync('/sys/fs/cgroup/memory')) {
      const dir = (c: string) => join('/sys/fs/cgroup', c, 'seed-sandbox', s.id);
      assert.equal(
        Number(readFileSync(join(dir('memory'), 'memory.limit_in_bytes'), 'utf8')),
        96 * 1024 * 1024,
      );
      assert.equal(Number(readFileSync(join(dir('cpu'), 'cpu.cfs_quota_us'), 'utf8')), 50_000);
      assert.equal(Number(readFileSync(join(dir('pids'), 'pids.max'), 'utf8')), 80 + SENTRY_TASKS);
    }
    const stats = await engine.stats(s.id);
    assert.ok((stats.memoryBytes ?? 0) > 1024 * 1024, 'the sandbox uses memory');
    assert.ok((stats.memoryBytes ?? 0) <= 96 * 1024 * 1024);
    assert.ok(typeof stats.cpuPercent === 'number' && stats.cpuPercent >= 0 && stats.cpuPercent <= 100);
    assert.equal(stats.networkBytesSent, 0);
    await engine.remove(s.id, s.boxDir);
    assert.deepEqual(await engine.stats(s.id), {});
  });

  test('diskSizeGb: writes to the box root stop at the disk size with ENOSPC', async () => {
    const s = spec({ diskSizeGb: 0.05 });
    await engine.start(s);
    const r = await sh(
      s.id,
      'dd if=/dev/zero of=/root/fill bs=1M count=80 2>&1; sync; echo rc=$?; du -m /root/fill',
    );
    assert.match(r.stdout, /No space left on device/);
    assert.ok(Number(r.stdout.trim().split(/\s+/).at(-2)) < 50, r.stdout);
    await engine.remove(s.id, s.boxDir);
  });

  test('volumes: read-write and read-only bind mounts', async () => {
    const rw = join(tmp, 'vol-rw');
    const ro = join(tmp, 'vol-ro');
    mkdirSync(rw, { recursive: true });
    mkdirSync(ro, { recursive: true });
    writeFileSync(join(ro, 'in.txt'), 'from host\n');
    const s = spec({
      mounts: [
        { hostPath: rw, guestPath: '/data', readOnly: false },
        { hostPath: ro, guestPath: '/ro', readOnly: true },
      ],
    });
    await engine.start(s);
    const r = await sh(s.id, 'echo written > /data/out.txt && cat /ro/in.txt && ! echo x > /ro/new.txt');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, 'from host\n');
    assert.equal(readFileSync(join(rw, 'out.txt'), 'utf8'), 'written\n');
    assert.ok(!existsSync(join(ro, 'new.txt')));
    await engine.remove(s.id, s.boxDir);
  });

  test('a non-detached gVisor box ends with its creating process, even on SIGKILL; a detached one stays', async () => {
    const tiers = join(import.meta.dirname, '../src/engine/gvisor-tiers.ts');
    const startInChild = async (s: ReturnType<typeof spec>) => {
      const script = join(tmp, `child-${s.id}.ts`);
      writeFileSync(
        script,
        `import { createTieredEngine } from ${JSON.stringify(tiers)};
const engine = await createTieredEngine({ stateRoot: ${JSON.stringify(stateRoot)}, gvisorPlatform: 'ptrace' });
console.log((await engine.start(${JSON.stringify(s)})).pid);
setInterval(() => {}, 1000);
`,
      );
      const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'] });
      const pid = await new Promise<number>((resolve, reject) => {
        child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
        child.once('exit', (code) => reject(new Error(`child exited with ${code}`)));
      });
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      return pid;
    };
    const gone = processGone;
    const attached = spec({ detach: false });
    const pid = await startInChild(attached);
    // The supervisor's cleanup runs when the pipe from the dead process ends (polled here up to 20 s).
    const cgroupsLeft = (id: string) => boxCgroupDirs(id).filter((d) => existsSync(d));
    for (
      let i = 0;
      i < 400 &&
      !(gone(pid) && mountsUnder(attached.boxDir).length === 0 && cgroupsLeft(attached.id).length === 0);
      i++
    )
      await sleep(50);
    assert.ok(gone(pid), 'the sandbox of the non-detached box ended');
    assert.deepEqual(mountsUnder(attached.boxDir), []);
    assert.deepEqual(cgroupsLeft(attached.id), [], "the supervisor's cleanup removes the box's cgroup");
    assert.equal((await engine.state(attached.id)).status, 'stopped');
    await engine.remove(attached.id, attached.boxDir);

    const detached = spec({ detach: true });
    const dpid = await startInChild(detached);
    assert.ok(!gone(dpid), 'the detached box survives its creator');
    assert.equal((await sh(detached.id, 'echo still here')).stdout, 'still here\n');
    await engine.remove(detached.id, detached.boxDir);
    assert.ok(gone(dpid));
    assert.deepEqual(cgroupsLeft(detached.id), [], "remove deletes the box's cgroup");
  });

  test('network: runsc boots the sandbox while the link is made and takes the link over at the gate; a failed link leaves nothing', async () => {
    let refuse = false;
    const booted: boolean[] = [];
    const tornDown: string[] = [];
    const runscState = (id: string) => join(tmp, 'state-net', 'runsc', `${id}_sandbox:${id}.state`);
    const net = await createTieredEngine({
      stateRoot: join(tmp, 'state-net'),
      gvisorPlatform: 'ptrace',
      // The link is made only once runsc has booted the sandbox (its state file exists): the start gate
      // holds runsc until then, and runsc takes over an interface made after it booted.
      async networkPrepare(ctx) {
        for (let i = 0; i < 200 && !existsSync(runscState(ctx.id)); i++) await sleep(25);
        booted.push(existsSync(runscState(ctx.id)));
        if (refuse) throw new Error('link refused by the test');
        const link = spawnSync(
          'nsenter',
          [
            `--net=${ctx.netns}`,
            'sh',
            '-c',
            'ip link add eth0 type veth peer name gate0 && ip addr add 10.9.0.2/24 dev eth0 && ip link set eth0 up && ip link set gate0 up',
          ],
          { encoding: 'utf8' },
        );
        assert.equal(link.status, 0, link.stderr);
      },
      async networkTeardown(id) {
        tornDown.push(id);
      },
    });
    const s = spec({ network: { mode: 'enabled', allowNet: [] } });
    await net.start(s);
    try {
      assert.deepEqual(booted, [true]);
      const r = await execSh(net as never, s.id, 'ip addr show eth0');
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /inet 10\.9\.0\.2\/24/);
      assert.equal(existsSync(join(s.boxDir, 'bundle', 'start-gate')), false);
    } finally {
      await net.remove(s.id, s.boxDir);
    }

    refuse = true;
    const f = spec({ network: { mode: 'enabled', allowNet: [] } });
    await assert.rejects(net.start(f), /network setup failed: link refused by the test/);
    assert.deepEqual(booted, [true, true]);
    assert.deepEqual(tornDown.slice(-1), [f.id]);
    // The sandbox runsc had booted is gone with its state, cgroup, mounts, gate and namespace file.
    assert.equal(existsSync(runscState(f.id)), false);
    assert.deepEqual(
      boxCgroupDirs(f.id).filter((d) => existsSync(d)),
      [],
    );
    assert.deepEqual(mountsUnder(f.boxDir), []);
    assert.equal(existsSync(join(f.boxDir, 'bundle', 'start-gate')), false);
    assert.equal(existsSync(join(f.boxDir, 'bundle', 'netns')), false);
    await net.remove(f.id, f.boxDir);
  });

  test('a start failure names the stage and leaves nothing mounted; symlinked host paths are refused', async () => {
    const dir = join(tmp, 'vol-dir');
    mkdirSync(dir, { recursive: true });
    // A directory over the image's busybox binary: runsc refuses it when it builds the mounts.
    const s = spec({ mounts: [{ hostPath: dir, guestPath: '/bin/busybox', readOnly: false }] });
    await assert.rejects(engine.start(s), /box gv\d+x\d+: start failed at run \(runsc, platform ptrace\)/);
    assert.deepEqual(mountsUnder(s.boxDir), []);
    await engine.remove(s.id, s.boxDir);
    const link = join(tmp, 'vol-link');
    symlinkSync(dir, link);
    const l = spec({ mounts: [{ hostPath: link, guestPath: '/data', readOnly: false }] });
    await assert.rejects(engine.start(l), /mounts\[0\]\.hostPath: .* passes through the symlink/);
    assert.deepEqual(mountsUnder(l.boxDir), []);
  });
});
