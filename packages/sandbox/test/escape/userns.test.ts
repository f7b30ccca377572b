/**
 * Escape suite, user namespaces: box root is not host root. Reads `/proc/<pid>/status` from the host
 * for every process of a box of each tier (init, exec'd commands, a tty command, a command of another
 * user) and checks the host ids; shows that box root owns its image files and writes them as the
 * mapped host uid, that host files outside the box's range stay out of its reach even for box root,
 * that its capabilities are those of its own namespace (no device nodes, no nested namespaces), and
 * that the files API writes as the box user's host uid.
 *
 * Host-side helpers that are by design outside the box, named here: the box supervisor (`sh
 * supervisor.sh`, host root, not in the box's namespaces or cgroup) and the `crun exec` / `runsc exec`
 * / tty relay processes on the host side of each exec. For the gVisor tier (runsc 0.0~20221219 with
 * `--network=sandbox`, or `--network=none` for a box without a network, run in the gVisor user
 * namespace that maps the sandbox range), no process in
 * the box's cgroup has a host id outside the sandbox range: every process that runs the box's code —
 * the sandbox process (the Sentry) and, on the ptrace platform, the stubs it forks, in which the
 * box's instructions execute — is the range's `nobody` (host uid/gid start + 65534) in a user
 * namespace of runsc's own that maps only that id; the one other process, the gofer (which opens the
 * box's files for the Sentry and runs no box code), is the range's root (host uid/gid start),
 * confined (chrooted to the box root, no_new_privs, a seccomp filter, only the file capabilities
 * listed in `GOFER_CAPS`, of its own namespace). A gofer, Sentry or stub with host uid 0, or any other
 * process in a gVisor box's cgroup, fails the test (SECURITY.md "gVisor tier").
 */
import assert from 'node:assert/strict';
import {
  chownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
// internal: the box disk's layer directories are inspected
import { diskLayerDirs } from '../../src/engine/disk.ts';
// internal: boxes are made with the engine directly
import { createTieredEngine, type TieredEngine } from '../../src/engine/gvisor-tiers.ts';
// internal: the id mapping is tested as a unit
import { ensureSandboxIdRange, type IdMapping } from '../../src/engine/idmap.ts';
// internal: boxes are made with the engine directly
import { makeBusyboxRootfs } from '../../src/engine/index.ts';
// internal: boxes are made with the engine directly
import type { EngineProcess } from '../../src/engine/types.ts';
// internal: the local file backend is tested as a unit
import { LocalFiles } from '../../src/runtime/files/local.ts';
// internal: processIdentity pins the box's init process
import { processIdentity } from '../../src/runtime/state.ts';
import { collect, execSh, specFactory, supervisorPid } from '../helpers/engine.ts';
import { GVISOR_SKIP } from '../runtime-helpers.ts';
import { assertHostUntouched, snapshotHost } from './helpers.ts';

const tmp = mkdtempSync(join(tmpdir(), 'escape-userns-'));
const rootfs = makeBusyboxRootfs(join(tmp, 'layer'));
let engine: TieredEngine;
let range: IdMapping;
const CAP_SYS_ADMIN = 21n;
/**
 * The gofer's effective capabilities (in the gVisor user namespace): CHOWN, DAC_OVERRIDE,
 * DAC_READ_SEARCH, FOWNER, FSETID (bits 0-4) and SYS_CHROOT (18), as runsc 20221219 gives it.
 */
const GOFER_CAPS = 0x4001fn;
/** `nobody`, the only id runsc maps into the Sentry's user namespace (host id: range start + 65534). */
const NOBODY = 65534;

before(async () => {
  engine = await createTieredEngine({ stateRoot: join(tmp, 'state'), gvisorPlatform: 'ptrace' });
  range = ensureSandboxIdRange(false);
});
after(async () => {
  for (const b of (await engine?.list().catch(() => [])) ?? [])
    await engine.remove(b.id, b.boxDir ?? join(tmp, 'boxes', b.id)).catch(() => {});
  rmSync(tmp, { recursive: true, force: true });
});

/** What the host sees of one process: ids of `/proc/<pid>/status`, confinement, name. */
interface HostView {
  pid: number;
  uids: number[];
  gids: number[];
  capEff: bigint;
  noNewPrivs: boolean;
  seccomp: number;
  userns: string;
  cmdline: string;
}

function hostView(pid: number): HostView | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (key: string) => new RegExp(`^${key}:\\s+(.*)$`, 'm').exec(status)?.[1] ?? '';
    return {
      pid,
      uids: field('Uid').split(/\s+/).map(Number),
      gids: field('Gid').split(/\s+/).map(Number),
      capEff: BigInt(`0x${field('CapEff')}`),
      noNewPrivs: field('NoNewPrivs') === '1',
      seccomp: Number(field('Seccomp')),
      userns: readlinkSync(`/proc/${pid}/ns/user`),
      cmdline: readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim(),
    };
  } catch {
    return undefined; // exited meanwhile
  }
}

/**
 * Every process of the box of `initPid`: the members of its pids cgroup (all tiers put the box there),
 * of cgroup v1's pids hierarchy or of the v2 hierarchy.
 */
function boxProcesses(initPid: number): HostView[] {
  const lines = readFileSync(`/proc/${initPid}/cgroup`, 'utf8').split('\n');
  const v1 = lines.find((l) => /^\d+:([^:]*,)?pids(,[^:]*)?:/.test(l));
  const line = v1 ?? lines.find((l) => l.startsWith('0::'));
  assert.ok(line, 'the box init has a pids cgroup');
  const path = line.slice(line.indexOf(':', line.indexOf(':') + 1) + 1);
  assert.match(path, /seed-sandbox/, 'the init is in a box cgroup');
  const procs = readFileSync(
    join(v1 ? '/sys/fs/cgroup/pids' : '/sys/fs/cgroup', path, 'cgroup.procs'),
    'utf8',
  )
    .split('\n')
    .filter(Boolean)
    .map(Number);
  return procs.map(hostView).filter((v): v is HostView => v !== undefined);
}

/** Starts `exec` commands that stay running while the host looks: root, user 1000, a tty. */
async function runningCommands(id: string, tty: boolean): Promise<EngineProcess[]> {
  const procs = [
    await engine.exec(id, { cmd: 'sleep', args: ['30'], env: [] }),
    await engine.exec(id, { cmd: 'sleep', args: ['31'], env: [], user: '1000:1000' }),
  ];
  if (tty) procs.push(await engine.exec(id, { cmd: 'sleep', args: ['32'], env: [], tty: true }));
  return procs;
}

async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
}

const hostUserns = readlinkSync('/proc/self/ns/user');

describe('host ids of every box process (/proc/<pid>/status read from the host)', () => {
  test('container tier: init and every command (root, user 1000, tty) run as ids of the sandbox range', async () => {
    const s = specFactory(tmp, rootfs, 'unsc')({ detach: false });
    const { pid } = await engine.start(s);
    const commands = await runningCommands(s.id, true);
    try {
      const sleeping = () => boxProcesses(pid).filter((p) => /sleep 3[012]$/.test(p.cmdline));
      await waitFor(() => sleeping().length === 3);
      const procs = boxProcesses(pid);
      assert.equal(sleeping().length, 3, procs.map((p) => p.cmdline).join('\n'));
      assert.ok(procs.some((p) => p.pid === pid && p.cmdline === '/.sandbox/init -P'));
      for (const p of procs) {
        for (const id of [...p.uids, ...p.gids]) {
          assert.ok(
            id >= range.hostUid && id < range.hostUid + range.size,
            `${p.cmdline}: ${p.uids} ${p.gids}`,
          );
        }
        assert.notEqual(p.userns, hostUserns, `${p.cmdline} is in the host user namespace`);
      }
      const byCmd = new Map(procs.map((p) => [p.cmdline, p]));
      assert.deepEqual(byCmd.get('/.sandbox/init -P')?.uids, Array(4).fill(range.hostUid));
      assert.deepEqual(byCmd.get('sleep 31')?.uids, Array(4).fill(range.hostUid + 1000));
      // The helpers outside the box: the supervisor is host root but in no namespace or cgroup of it.
      const supervisor = hostView(await supervisorPid(s.boxDir));
      assert.ok(supervisor?.cmdline.includes('supervisor.sh'), 'the supervisor of a non-detached box runs');
      assert.ok(!procs.some((p) => p.pid === supervisor?.pid));
      // Inside, the same processes are root and user 1000 of the box.
      const inside = await execSh(engine as never, s.id, 'id -u; cat /proc/self/uid_map');
      assert.equal(inside.stdout, `0\n         0     ${range.hostUid}      65536\n`);
    } finally {
      for (const c of commands) await c.kill();
      await engine.remove(s.id, s.boxDir);
    }
  });

  // Both runsc network modes the tier uses: `none` (network disabled) and `sandbox` (netstack).
  for (const mode of ['disabled', 'enabled'] as const)
    test(`gVisor tier, network ${mode}: no process in the box cgroup has host uid 0; the gofer is the range root, the Sentry and stubs its nobody`, {
      skip: GVISOR_SKIP,
    }, async () => {
      const s = specFactory(
        tmp,
        rootfs,
        `unsg${mode[0]}`,
      )({ isolation: 'gvisor', network: { mode, allowNet: [] } });
      const { pid } = await engine.start(s);
      const commands = await runningCommands(s.id, false);
      try {
        // The commands run once the Sentry has forked a stub for each (ptrace platform).
        await waitFor(() => boxProcesses(pid).filter((p) => isDescendant(p.pid, pid)).length >= 2);
        const procs = boxProcesses(pid);
        const list = procs.map((p) => `${p.pid} ${p.uids} ${p.cmdline}`).join('\n');
        const sandbox = procs.find((p) => p.cmdline.startsWith('runsc-sandbox'));
        const gofer = procs.find((p) => p.cmdline.startsWith('runsc-gofer'));
        assert.ok(sandbox && gofer, list);
        assert.equal(sandbox.pid, pid, 'the box pid is the Sentry');
        const boxCode = procs.filter((p) => p === sandbox || isDescendant(p.pid, sandbox.pid));
        assert.ok(boxCode.length >= 3, `the Sentry and the stubs running the two commands:\n${list}`);
        for (const p of procs) {
          assert.ok(
            p === gofer || boxCode.includes(p),
            `an unexpected process in the box: ${p.pid} ${p.cmdline}`,
          );
          // No process of the box is host root: every id is one of the sandbox range.
          for (const id of [...p.uids, ...p.gids]) {
            assert.ok(
              id >= range.hostUid && id < range.hostUid + range.size,
              `${p.pid} ${p.cmdline}: host ids\n${list}`,
            );
          }
          assert.notEqual(p.userns, hostUserns, `${p.pid} ${p.cmdline} is in the host user namespace`);
          assert.ok(p.noNewPrivs, `${p.cmdline}: no_new_privs`);
          assert.equal(p.seccomp, 2, `${p.cmdline}: seccomp filter`);
        }
        for (const p of boxCode) {
          // Every process that runs box code is the range's nobody, in runsc's own user namespace.
          assert.deepEqual(
            p.uids,
            Array(4).fill(range.hostUid + NOBODY),
            `${p.pid} ${p.cmdline}: host uids\n${list}`,
          );
          assert.deepEqual(p.gids, Array(4).fill(range.hostGid + NOBODY), `${p.pid} ${p.cmdline}: host gids`);
          assert.equal(p.userns, sandbox.userns, 'one user namespace for the Sentry and its stubs');
        }
        const idMap = (p: number, kind: string) =>
          readFileSync(`/proc/${p}/${kind}_map`, 'utf8').trim().split(/\s+/).join(' ');
        assert.equal(idMap(pid, 'uid'), `${NOBODY} ${range.hostUid + NOBODY} 1`);
        assert.equal(idMap(pid, 'gid'), `${NOBODY} ${range.hostGid + NOBODY} 1`);
        // The gofer: the range's root, in the gVisor user namespace (the range mapped), chrooted into
        // the box root, seccomp-filtered, file capabilities of that namespace only.
        assert.deepEqual(gofer.uids, Array(4).fill(range.hostUid));
        assert.deepEqual(gofer.gids, Array(4).fill(range.hostGid));
        assert.equal(idMap(gofer.pid, 'uid'), `0 ${range.hostUid} ${range.size}`);
        assert.equal(idMap(gofer.pid, 'gid'), `0 ${range.hostGid} ${range.size}`);
        assert.notEqual(gofer.userns, sandbox.userns);
        assert.equal(gofer.capEff, GOFER_CAPS, `gofer capabilities ${gofer.capEff.toString(16)}`);
        assert.equal((gofer.capEff >> CAP_SYS_ADMIN) & 1n, 0n);
        assert.notEqual(readlinkSync(`/proc/${gofer.pid}/root`), '/', 'the gofer is chrooted');
        assert.ok(!isDescendant(gofer.pid, sandbox.pid));
        // The box's own view: root of the Sentry's kernel, not a host process (no host uid map).
        const inside = await execSh(engine as never, s.id, 'id -u; cat /proc/version');
        assert.match(inside.stdout, /^0\n.*Linux version 4\.4\.0/s);
      } finally {
        for (const c of commands) await c.kill();
        await engine.remove(s.id, s.boxDir);
      }
    });
});

/** True when `pid` is a descendant of `ancestor` (host parent chain). */
function isDescendant(pid: number, ancestor: number): boolean {
  for (let p = pid, i = 0; p > 1 && i < 64; i++) {
    const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
    p = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (p === ancestor) return true;
  }
  return false;
}

describe('box root is not host root (container tier)', () => {
  const spec = specFactory(tmp, rootfs, 'unsb');

  test('box root writes its image files; on the host they are the mapped root, the shared layer untouched', async () => {
    const layerPasswd = readFileSync(join(rootfs, 'etc/passwd'), 'utf8');
    const s = spec();
    await engine.start(s);
    try {
      const r = await execSh(
        engine as never,
        s.id,
        'echo extra:x:7:7::/:/bin/sh >> /etc/passwd && echo new > /bin/new-tool && mkdir /srv && ls -ln /etc/passwd /bin/new-tool',
      );
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^-rw-r--r-- +1 0 +0 .*\/bin\/new-tool$/m);
      // The writable layer on the box disk (in its `layer` subvolume when the disk is btrfs, disk.ts).
      const { upper } = diskLayerDirs(join(s.boxDir, 'disk.img'), join(s.boxDir, 'disk'));
      for (const f of ['etc/passwd', 'bin/new-tool', 'srv']) {
        const st = lstatSync(join(upper, f));
        assert.deepEqual([st.uid, st.gid], [range.hostUid, range.hostGid], f);
      }
      assert.equal(readFileSync(join(rootfs, 'etc/passwd'), 'utf8'), layerPasswd);
      assert.equal(statSync(join(rootfs, 'etc/passwd')).uid, 0, 'the layer keeps its own owner');
    } finally {
      await engine.remove(s.id, s.boxDir);
    }
  });

  test('host files outside the range stay out of box root reach, also in a host volume', async () => {
    const vol = join(tmp, `vol-${process.pid}`);
    mkdirSync(vol, { recursive: true });
    writeFileSync(join(vol, 'foreign-secret'), 'foreign', { mode: 0o600 });
    chownSync(join(vol, 'foreign-secret'), 70_000, 70_000);
    writeFileSync(join(vol, 'host-root-file'), 'root', { mode: 0o600 });
    const before = snapshotHost({ paths: [vol] });
    const s = spec({ mounts: [{ hostPath: vol, guestPath: '/vol', readOnly: true }] });
    const { pid } = await engine.start(s);
    // A host-root file put into the box root from the host side: host uid 0 is outside the range too.
    writeFileSync(`/proc/${pid}/root/root-only`, 'host', { mode: 0o600 });
    try {
      const r = await execSh(
        engine as never,
        s.id,
        `ls -ln /vol/foreign-secret /root-only /vol/host-root-file
         cat /vol/foreign-secret 2>/dev/null && echo READ-foreign
         cat /root-only 2>/dev/null && echo READ-root-only
         chown 0:0 /root-only 2>/dev/null && echo CHOWNED
         chmod 666 /root-only 2>/dev/null && echo CHMODDED
         echo x > /vol/host-root-file 2>/dev/null && echo WROTE-ro-volume
         cat /vol/host-root-file; exit 0`,
      );
      assert.match(r.stdout, /^-rw------- +1 65534 +65534 .*\/vol\/foreign-secret$/m);
      assert.match(r.stdout, /^-rw------- +1 65534 +65534 .*\/root-only$/m);
      // A host volume is idmapped: host uid k is box uid k, so host root's file is box root's.
      assert.match(r.stdout, /^-rw------- +1 0 +0 .*\/vol\/host-root-file$/m);
      assert.doesNotMatch(r.stdout, /READ-|CHOWNED|CHMODDED|WROTE-/);
      assert.match(r.stdout, /root$/);
      assert.equal(statSync(`/proc/${pid}/root/root-only`).mode & 0o777, 0o600);
    } finally {
      await engine.remove(s.id, s.boxDir);
    }
    assertHostUntouched(before, { allowMountsUnder: [tmp] });
  });

  test('default box: no device nodes (CAP_MKNOD is the namespace’s), no nested user namespace', async () => {
    const s = spec();
    await engine.start(s);
    try {
      const r = await execSh(
        engine as never,
        s.id,
        `mknod /tmp/sda b 8 0 2>&1 && echo MKNOD-block
         mknod /tmp/mem c 1 1 2>&1 && echo MKNOD-mem
         unshare -U true 2>&1 && echo NESTED-userns
         unshare -m true 2>&1 && echo NESTED-mountns
         exit 0`,
      );
      assert.doesNotMatch(r.stdout, /MKNOD-|NESTED-/);
      assert.match(r.stdout, /mknod: \/tmp\/sda: Operation not permitted/);
    } finally {
      await engine.remove(s.id, s.boxDir);
    }
  });

  test('with SYS_ADMIN added: mounts of its own namespace only; no device nodes, no host sysctl', async () => {
    const s = spec({ capabilities: { add: ['SYS_ADMIN'], drop: [] } });
    await engine.start(s);
    try {
      const r = await execSh(
        engine as never,
        s.id,
        `mknod /tmp/sda b 8 0 2>&1 && echo MKNOD-block
         mkdir -p /mnt/t && mount -t tmpfs t /mnt/t && echo TMPFS-ok
         mount -o remount,rw /proc/sys 2>/dev/null
         echo 1 > /proc/sys/kernel/panic 2>/dev/null && echo WROTE-sysctl
         mount -t sysfs s /mnt/t 2>/dev/null && echo > /mnt/t/kernel/uevent_helper 2>/dev/null && echo WROTE-uevent
         grep CapEff /proc/self/status; exit 0`,
      );
      // Even where its own mount namespace lets it make /proc/sys writable again, host sysctls and
      // sysfs files are host root's, outside its user namespace.
      assert.doesNotMatch(r.stdout, /MKNOD-|WROTE-/, r.stderr);
      assert.match(r.stdout, /mknod: \/tmp\/sda: Operation not permitted/, `${r.stdout}${r.stderr}`);
      // A mount of its own namespace is what SYS_ADMIN in a user namespace still allows.
      assert.match(r.stdout, /TMPFS-ok/);
      const capEff = BigInt(`0x${/CapEff:\s+(\w+)/.exec(r.stdout)?.[1]}`);
      assert.equal((capEff >> CAP_SYS_ADMIN) & 1n, 1n, 'the box holds SYS_ADMIN, in its own namespace only');
    } finally {
      await engine.remove(s.id, s.boxDir);
    }
  });

  test('the files API writes as the box user: host owner is the mapped uid, the box sees its own', async () => {
    const vol = join(tmp, `hostvol-${process.pid}`);
    mkdirSync(vol, { recursive: true });
    const s = spec({ mounts: [{ hostPath: vol, guestPath: '/hv', readOnly: false }] });
    const { pid } = await engine.start(s);
    const files = new LocalFiles({ initPid: async () => ({ pid, identity: processIdentity(pid) }) });
    try {
      await files.writeStream('/srv/data/note.txt', Readable.from(['hello']));
      const { upper } = diskLayerDirs(join(s.boxDir, 'disk.img'), join(s.boxDir, 'disk'));
      const onHost = lstatSync(join(upper, 'srv', 'data', 'note.txt'));
      assert.deepEqual([onHost.uid, onHost.gid], [range.hostUid, range.hostGid]);
      const entry = await files.stat('/srv/data/note.txt');
      assert.deepEqual([entry.uid, entry.gid], [0, 0]);
      // In an idmapped host volume host root has no id: the entry is made as the box user and is the
      // host's uid 0 file there, as box root's writes are.
      await files.writeStream('/hv/sub/from-api.txt', Readable.from(['api']));
      const hv = lstatSync(join(vol, 'sub', 'from-api.txt'));
      assert.deepEqual([hv.uid, hv.gid], [0, 0]);
      assert.equal(readFileSync(join(vol, 'sub', 'from-api.txt'), 'utf8'), 'api');
      const inBox = await collect(
        await engine.exec(s.id, { cmd: 'stat', args: ['-c', '%u:%g', '/hv/sub/from-api.txt'], env: [] }),
      );
      assert.equal(inBox.stdout, '0:0\n');
    } finally {
      await engine.remove(s.id, s.boxDir);
    }
  });
});
