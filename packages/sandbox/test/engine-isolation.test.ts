/**
 * Isolation of engine boxes against real containers: host files and processes are invisible,
 * memory and pids limits are enforced, capabilities can be dropped and added, the seccomp profile
 * denies namespace creation, masked and read-only paths, read-only bind mounts, network `disabled`
 * leaves only `lo`, and `diskSizeGb` bounds the writable layer.
 */
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
// internal: the engine is tested as a unit
import type { EngineBoxSpec } from '../src/engine/index.ts';
import { collect, engineTestBed, execSh } from './helpers/engine.ts';

const bed = engineTestBed('engine-iso-', 'iso');
const { tmp, spec } = bed;
const sh = (id: string, script: string) => execSh(bed.engine, id, script);

/** Starts a box for the test and removes it afterwards. */
async function withBox<T>(o: Partial<EngineBoxSpec>, fn: (s: EngineBoxSpec) => Promise<T>): Promise<T> {
  const s = spec(o);
  await bed.engine.start(s);
  try {
    return await fn(s);
  } finally {
    await bed.engine.remove(s.id, s.boxDir);
  }
}

/** Effective capability mask of the box's shell (`CapEff` of /proc/self/status). */
async function capEff(id: string): Promise<bigint> {
  const r = await sh(id, 'grep CapEff /proc/self/status');
  return BigInt(`0x${r.stdout.split(/\s+/)[1]}`);
}

const CAP_NET_ADMIN = 12n;
const CAP_NET_RAW = 13n;
const CAP_CHOWN = 0n;

describe('box isolation', () => {
  let box: EngineBoxSpec;
  before(async () => {
    box = spec();
    await bed.engine.start(box);
  });
  after(async () => {
    await bed.engine.remove(box.id, box.boxDir);
  });

  test('host files are not visible', async () => {
    const marker = join(tmp, 'host-secret');
    writeFileSync(marker, 'secret');
    const r = await sh(box.id, `cat ${marker}; ls /work /usr 2>&1; ls / | tr '\\n' ' '`);
    assert.doesNotMatch(r.stdout, /secret/);
    assert.match(r.stdout, /No such file or directory/);
    assert.equal(r.stdout.trim().split('\n').at(-1), 'bin dev etc home proc root sys tmp var');
  });

  test('host processes are not visible; the box init is pid 1', async () => {
    const r = await sh(
      box.id,
      'ls /proc | grep -E "^[0-9]+$" | wc -l; cat /proc/1/cmdline | tr "\\0" " "; kill -0 ' +
        process.pid +
        ' && echo seen',
    );
    const [count, cmdline] = r.stdout.split('\n');
    assert.ok(Number(count) <= 5, `box sees ${count} processes`);
    assert.match(cmdline ?? '', /^\/\.sandbox\/init -P/);
    assert.doesNotMatch(r.stdout, /seen/);
  });

  test('only loopback exists with network disabled', async () => {
    const r = await sh(box.id, 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "');
    assert.equal(r.stdout, 'lo\n');
  });

  test('masked and read-only kernel paths', async () => {
    // /proc/timer_list is non-empty on the host; /sys/firmware has entries on the host.
    const r = await sh(
      box.id,
      'wc -c < /proc/timer_list; echo 1 > /proc/sys/kernel/domainname && echo wrote; ls /sys/firmware | wc -l',
    );
    assert.equal(r.stdout, '0\n0\n');
    assert.match(r.stderr, /Read-only file system/);
  });

  test('seccomp denies new namespaces and the mount family', async () => {
    const r = await sh(
      box.id,
      'unshare -U true; echo u=$?; unshare -n true; echo n=$?; mount -t tmpfs t /mnt; echo m=$?',
    );
    assert.match(r.stdout, /u=1\nn=1\nm=[1-9]/);
    assert.match(r.stderr, /Operation not permitted/);
  });

  test('default capabilities: Docker set without NET_RAW (CHOWN yes; NET_RAW, NET_ADMIN no)', async () => {
    const eff = await capEff(box.id);
    assert.equal((eff >> CAP_CHOWN) & 1n, 1n);
    assert.equal((eff >> CAP_NET_RAW) & 1n, 0n);
    assert.equal((eff >> CAP_NET_ADMIN) & 1n, 0n);
    const r = await sh(box.id, 'ip link set lo mtu 1400; echo rc=$?');
    assert.match(r.stdout, /rc=[1-9]/);
  });
});

test('capabilities: drop NET_RAW removes it (no raw ICMP socket); add NET_ADMIN grants it', async () => {
  await withBox({ capabilities: { add: ['net_admin'], drop: ['CAP_NET_RAW'] } }, async (s) => {
    const eff = await capEff(s.id);
    assert.equal((eff >> CAP_NET_RAW) & 1n, 0n);
    assert.equal((eff >> CAP_NET_ADMIN) & 1n, 1n);
    const ping = await sh(s.id, 'ping -c 1 -W 1 127.0.0.1; echo rc=$?');
    assert.match(ping.stdout, /rc=[1-9]/);
    assert.match(ping.stderr, /permission denied|Operation not permitted/i);
    const mtu = await sh(s.id, 'ip link set lo mtu 1400 && cat /sys/class/net/lo/mtu');
    assert.equal(mtu.stdout, '1400\n');
  });
});

test('adding SYS_ADMIN also lifts its seccomp rules: mount works in that box only', async () => {
  await withBox({ capabilities: { add: ['SYS_ADMIN'], drop: [] } }, async (s) => {
    const r = await sh(s.id, 'mkdir -p /mnt/t && mount -t tmpfs t /mnt/t && echo mounted');
    assert.equal(r.stdout, 'mounted\n');
  });
});

test('memory limit: an allocation beyond memoryMib is OOM-killed, a smaller one succeeds', async () => {
  await withBox({ memoryMib: 64 }, async (s) => {
    const small = await sh(s.id, 'dd if=/dev/zero of=/dev/null bs=16M count=1 2>/dev/null; echo ok');
    assert.equal(small.stdout, 'ok\n');
    const big = await collect(
      await bed.engine.exec(s.id, {
        cmd: 'dd',
        args: ['if=/dev/zero', 'of=/dev/null', 'bs=200M', 'count=1'],
        env: [],
      }),
    );
    assert.equal(big.code, 137);
    assert.equal((await sh(s.id, 'echo alive')).stdout, 'alive\n');
  });
});

test('pids limit: a fork bomb is stopped and the box survives it', async () => {
  await withBox({ pidsLimit: 24 }, async (s) => {
    const r = await sh(
      s.id,
      'i=0; while [ $i -lt 60 ]; do sleep 1000 >/dev/null 2>&1 & i=$((i+1)); done; echo done',
    );
    assert.match(r.stderr, /can't fork|Resource temporarily unavailable/);
    const init = (await bed.engine.state(s.id)).pid as number;
    const cgroups = readFileSync(`/proc/${init}/cgroup`, 'utf8');
    const v1 = cgroups.match(/^\d+:pids:(.*)$/m)?.[1];
    const procsFile = v1
      ? `/sys/fs/cgroup/pids${v1}/cgroup.procs`
      : `/sys/fs/cgroup${cgroups.match(/^0::(.*)$/m)?.[1]}/cgroup.procs`;
    const procs = readFileSync(procsFile, 'utf8').split('\n').filter(Boolean).map(Number);
    assert.ok(procs.length <= 24, `box runs ${procs.length} processes with pidsLimit 24`);
    assert.ok(procs.length >= 20, `the box could fork up to its limit (${procs.length})`);
    for (const pid of procs) if (pid !== init) process.kill(pid, 'SIGKILL');
    let out = '';
    for (let i = 0; i < 100 && out !== 'alive\n'; i++)
      out = (await sh(s.id, 'echo alive').catch(() => ({ stdout: '' }))).stdout;
    assert.equal(out, 'alive\n');
  });
});

test('bind mounts: read-only is enforced, read-write writes through to the host', async () => {
  const ro = join(tmp, 'ro-vol');
  const rw = join(tmp, 'rw-vol');
  mkdirSync(ro);
  mkdirSync(rw);
  writeFileSync(join(ro, 'data'), 'from host');
  await withBox(
    {
      mounts: [
        { hostPath: ro, guestPath: '/mnt/ro', readOnly: true },
        { hostPath: rw, guestPath: '/mnt/rw', readOnly: false },
      ],
    },
    async (s) => {
      const r = await sh(s.id, 'cat /mnt/ro/data; echo x > /mnt/ro/new; echo from box > /mnt/rw/out');
      assert.equal(r.stdout, 'from host');
      assert.match(r.stderr, /Read-only file system/);
      assert.equal(readFileSync(join(rw, 'out'), 'utf8'), 'from box\n');
    },
  );
});

test('diskSizeGb bounds the writable layer; the layer survives a restart', async () => {
  const s = spec({ diskSizeGb: 0.05 });
  await bed.engine.start(s);
  try {
    const full = await sh(s.id, 'dd if=/dev/zero of=/root/big bs=1M count=80 2>&1; echo rc=$?');
    assert.match(full.stdout, /No space left on device/);
    const small = await sh(s.id, 'rm /root/big; echo kept > /root/k && cat /root/k');
    assert.equal(small.stdout, 'kept\n');
    await bed.engine.stop(s.id, 0);
    await bed.engine.start(s);
    assert.equal((await sh(s.id, 'cat /root/k')).stdout, 'kept\n');
  } finally {
    await bed.engine.remove(s.id, s.boxDir);
  }
});
