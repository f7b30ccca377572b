/**
 * Escape suite, the classes a default box already contains (python:slim boxes from the local
 * registry, probing with raw syscalls through ctypes): kernel modules, kexec, bpf, keyrings,
 * userfaultfd, io_uring, perf, reboot, swap, mount, nested user and mount namespaces, setns,
 * handle opens, clocks; writes to /proc/sys, /proc/sysrq-trigger, /sys, cgroup files and the host
 * binaries bound into the box (/proc/self/exe included); device nodes; other boxes' processes (ptrace
 * and signals cannot reach what a box cannot see); fork
 * bombs and memory. Every case asserts the host untouched (host binaries, hostname, mounts,
 * listeners, leftover processes), not only that the call failed.
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
// internal: findExecutable names the host's runtime binaries
import { findExecutable } from '../../src/engine/engine.ts';
import type { JsBox, JsRuntime } from '../../src/index.ts';
import { cleanupAll, ensureRegistry, run, tempHome, testRuntime } from '../runtime-helpers.ts';
import { assertHostUntouched, boxProcessHostUids, type HostSnapshot, snapshotHost } from './helpers.ts';

/** Python printing `{ probe: 'ok' | errno }` as JSON for each attack (x86_64 and aarch64 numbers). */
const PROBE = `
import ctypes, json, os, platform
libc = ctypes.CDLL(None, use_errno=True)
arm = platform.machine() == 'aarch64'
NR = dict(init_module=(175, 105), finit_module=(313, 273), kexec_load=(246, 104), kexec_file_load=(320, 294),
          bpf=(321, 280), keyctl=(250, 219), add_key=(248, 217), userfaultfd=(323, 282), io_uring_setup=(425, 425),
          perf_event_open=(298, 241), reboot=(169, 142), swapon=(167, 224), open_by_handle_at=(304, 265),
          acct=(163, 89), setns=(308, 268), unshare=(272, 97), mount=(165, 40))
out = {}
def sc(name, *args):
    r = libc.syscall(NR[name][1 if arm else 0], *args)
    out[name] = 'ok' if r >= 0 else ctypes.get_errno()
attr = ctypes.create_string_buffer(128)
sc('init_module', None, 0, b'')
sc('finit_module', -1, b'', 0)
sc('kexec_load', 0, 0, None, 0)
sc('kexec_file_load', -1, -1, 0, None, 0)
sc('bpf', 5, attr, 128)                      # BPF_PROG_LOAD
sc('keyctl', 0, -3, 0)                       # KEYCTL_GET_KEYRING_ID of the session keyring
sc('add_key', b'user', b'k', b'v', 1, -3)
sc('userfaultfd', 0)
sc('io_uring_setup', 1, attr)
sc('perf_event_open', attr, 0, -1, -1, 0)
sc('reboot', 0xfee1dead, 672274793, 0x4321fedc, None)   # LINUX_REBOOT_CMD_POWER_OFF
sc('swapon', b'/tmp', 0)
sc('open_by_handle_at', -100, attr, 0)
sc('acct', b'/tmp/acct')
sc('unshare', 0x10000000)                    # CLONE_NEWUSER
out['unshare_newuser'] = out.pop('unshare')
sc('unshare', 0x00020000)                    # CLONE_NEWNS
out['unshare_newns'] = out.pop('unshare')
sc('setns', os.open('/proc/1/ns/net', os.O_RDONLY), 0)
sc('mount', b'none', b'/mnt', b'tmpfs', 0, None)
ts = (ctypes.c_long * 2)(0, 0)
out['clock_settime'] = 'ok' if libc.clock_settime(0, ts) == 0 else ctypes.get_errno()
def write(name, path, data=b'x'):
    try:
        with open(path, 'wb', buffering=0) as f: f.write(data)
        out[name] = 'ok'
    except OSError as e:
        out[name] = e.errno
write('proc_sys_hostname', '/proc/sys/kernel/hostname', b'pwned')
write('proc_sysrq', '/proc/sysrq-trigger', b'h')
write('proc_core_pattern', '/proc/sys/kernel/core_pattern', b'|/tmp/x')
write('sys_uevent_helper', '/sys/kernel/uevent_helper', b'/tmp/x')
write('sys_power', '/sys/power/state', b'mem')
for d in os.listdir('/sys/fs/cgroup'):
    if os.path.exists(f'/sys/fs/cgroup/{d}/release_agent'):
        write('cgroup_release_agent', f'/sys/fs/cgroup/{d}/release_agent', b'/tmp/x')
write('cgroup_procs', '/sys/fs/cgroup/pids/cgroup.procs' if os.path.exists('/sys/fs/cgroup/pids') else '/sys/fs/cgroup/cgroup.procs', b'1')
for d in os.listdir('/sys/fs/cgroup'):
    try:
        if os.path.exists(f'/sys/fs/cgroup/{d}/cgroup.procs'):
            os.mkdir(f'/sys/fs/cgroup/{d}/escape'); out[f'cgroup_mkdir_{d}'] = 'ok'
    except OSError as e:
        out[f'cgroup_mkdir_{d}'] = e.errno
write('sandbox_init', '/.sandbox/init')
write('sandbox_busybox', '/.sandbox/busybox')
write('proc_self_exe', '/proc/self/exe')
try:
    os.mknod('/tmp/sda', 0o600 | 0o060000, os.makedev(8, 0))
    os.open('/tmp/sda', os.O_RDONLY); out['block_device'] = 'ok'
except OSError as e:
    out['block_device'] = e.errno
try:
    os.open('/dev/kmsg', os.O_RDONLY); out['kmsg'] = 'ok'
except OSError as e:
    out['kmsg'] = e.errno
print(json.dumps(out))
`;

let runtime: JsRuntime;
let snap: HostSnapshot;
let home: string;
const watched = ['/usr/bin/catatonit', '/bin/busybox', findExecutable('crun'), findExecutable('runc')].filter(
  (p): p is string => p !== undefined,
);

before(async () => {
  ensureRegistry();
  home = tempHome('escape-contained-');
  runtime = testRuntime(home);
  snap = snapshotHost({ paths: [...watched, '/proc/sys/kernel/hostname', '/proc/sys/kernel/core_pattern'] });
});
after(async () => {
  await cleanupAll();
  // Every box is gone: nothing of them may remain on the host.
  assertHostUntouched(snap, { allowMountsUnder: [home] });
});

async function box(options: Parameters<JsRuntime['create']>[0] = {}): Promise<JsBox> {
  return runtime.create({ image: 'python:slim', memoryMib: 256, network: { mode: 'disabled' }, ...options });
}

describe('contained attacks', () => {
  test('kernel-global syscalls, namespaces, mounts, /proc and /sys writes, host binaries and devices all fail', async () => {
    const b = await box();
    const r = await run(b, 'python3', ['-c', PROBE]);
    assert.equal(r.exitCode, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Record<string, number | 'ok'>;
    const succeeded = Object.entries(out).filter(([, v]) => v === 'ok');
    assert.deepEqual(succeeded, [], 'attacks that succeeded');
    assert.ok(Object.keys(out).length >= 30, `${Object.keys(out).length} probes ran`);
    assert.equal(
      hostname(),
      (await import('node:fs')).readFileSync('/proc/sys/kernel/hostname', 'utf8').trim(),
    );
    assertHostUntouched(snap, { allowMountsUnder: [home], runningInits: [(await b.info()).state.pid ?? 0] });
    await runtime.remove(b.id, true);
  });

  test("a box cannot see or signal another box's processes", async () => {
    const victim = await box();
    const sleeper = await victim.exec('sleep', ['1000']);
    const attacker = await box();
    const victimPid = (await victim.info()).state.pid!;
    const victimHost = boxProcessHostUids(victimPid).map((p) => p.pid);
    const r = await run(attacker, 'sh', [
      '-c',
      `ls /proc | grep -c '^[0-9]'; for p in ${victimHost.join(' ')}; do kill -9 $p 2>/dev/null && echo killed $p; done; true`,
    ]);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /killed/);
    assert.ok(Number(r.stdout.split('\n')[0]) < 10, 'the attacker sees only its own few processes');
    assert.ok(
      boxProcessHostUids(victimPid).some((p) => p.comm === 'sleep'),
      'the victim’s sleep still runs',
    );
    await sleeper.kill();
    await runtime.remove(attacker.id, true);
    await runtime.remove(victim.id, true);
  });

  test('a fork bomb stops at the pids limit and memory at the box limit; the host keeps its processes', async () => {
    const b = await box();
    const init = (await b.info()).state.pid!;
    const bomb = await run(b, 'sh', [
      '-c',
      'i=0; while [ $i -lt 1500 ]; do sleep 60 & i=$((i+1)); done 2>/dev/null; echo $i',
    ]);
    const count = boxProcessHostUids(init).length;
    assert.ok(count <= 1024, `${count} processes in the box`);
    assert.ok(count > 100, `${count} processes: the bomb ran`);
    assert.ok(bomb.exitCode !== 0 || Number(bomb.stdout) < 1500 || count <= 1024);
    await run(b, 'sh', ['-c', 'pkill sleep; true']);
    const mem = await run(b, 'python3', ['-c', 'x = bytearray(600 * 1024 * 1024); print("allocated")']);
    assert.notEqual(mem.exitCode, 0, 'a 600 MiB allocation in a 256 MiB box is killed');
    assert.doesNotMatch(mem.stdout, /allocated/);
    const alive = await run(b, 'true');
    assert.equal(alive.exitCode, 0, 'the box itself survives');
    await runtime.remove(b.id, true);
  });
});
