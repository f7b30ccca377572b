/**
 * The engine's OCI configuration as data (no containers): capability sets, the seccomp profile,
 * cgroup resources from `cpus`/`memoryMib`/`pidsLimit`, mounts, and spec validation errors.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
// internal: the engine's OCI config builder is tested as a unit
import {
  buildOciConfig,
  DEFAULT_CAPABILITIES,
  defaultSeccompProfile,
  type EngineBoxSpec,
  resolveCapabilities,
  validateSpec,
} from '../src/engine/index.ts';
import { BoxError } from '../src/index.ts';

const base: EngineBoxSpec = {
  id: '01JABCDEF',
  hostname: 'web',
  layerDirs: ['/layers/a', '/layers/b'],
  boxDir: '/boxes/01JABCDEF',
  env: ['PATH=/bin'],
  workingDir: '/root',
  cpus: 1.5,
  memoryMib: 512,
  pidsLimit: 256,
  mounts: [{ hostPath: '/data', guestPath: '/mnt/data', readOnly: true }],
  capabilities: { add: [], drop: [] },
  network: { mode: 'disabled', allowNet: [] },
  detach: false,
};

const paths = {
  rootfs: '/boxes/01JABCDEF/rootfs',
  init: '/usr/bin/catatonit',
  initArgs: ['-P'],
  ttyHelper: '/bin/busybox',
  cgroupsPath: '/seed-sandbox/01JABCDEF',
};

describe('capabilities', () => {
  test("the default set is Docker's 14 without NET_RAW", () => {
    assert.equal(DEFAULT_CAPABILITIES.length, 13);
    assert.ok(!DEFAULT_CAPABILITIES.includes('CAP_NET_RAW'));
    assert.deepEqual(resolveCapabilities({ add: [], drop: [] }), [...DEFAULT_CAPABILITIES].sort());
  });

  test('add/drop accept any case, with or without CAP_; ALL works both ways', () => {
    const caps = resolveCapabilities({ add: ['sys_admin', 'CAP_NET_ADMIN'], drop: ['net_raw', 'CAP_MKNOD'] });
    assert.ok(caps.includes('CAP_SYS_ADMIN') && caps.includes('CAP_NET_ADMIN'));
    assert.ok(!caps.includes('CAP_NET_RAW') && !caps.includes('CAP_MKNOD'));
    assert.deepEqual(resolveCapabilities({ add: ['KILL'], drop: ['ALL'] }), ['CAP_KILL']);
    assert.ok(resolveCapabilities({ add: ['ALL'], drop: [] }).includes('CAP_SYS_MODULE'));
  });

  test('an unknown name is a BoxError naming the field', () => {
    assert.throws(
      () => resolveCapabilities({ add: [], drop: ['CAP_FLY'] }),
      (e: Error) => e instanceof BoxError && /^advanced\.capabilities\.drop: 'CAP_FLY'/.test(e.message),
    );
  });
});

describe('seccomp profile', () => {
  const denied = (caps: string[]) =>
    defaultSeccompProfile(caps)
      .syscalls.filter((r) => r.action === 'SCMP_ACT_ERRNO' && !r.args)
      .flatMap((r) => r.names);

  test('kernel-global syscalls are always denied; clone3 gets ENOSYS', () => {
    const p = defaultSeccompProfile(DEFAULT_CAPABILITIES);
    assert.equal(p.defaultAction, 'SCMP_ACT_ALLOW');
    for (const s of ['kexec_load', 'init_module', 'open_by_handle_at', 'keyctl', 'io_uring_setup']) {
      assert.ok(denied([...DEFAULT_CAPABILITIES]).includes(s), s);
    }
    assert.deepEqual(
      p.syscalls.find((r) => r.names.includes('clone3')),
      { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 },
    );
  });

  test('capability-gated syscalls open up when the capability is added', () => {
    assert.ok(denied([...DEFAULT_CAPABILITIES]).includes('mount'));
    assert.ok(!denied([...DEFAULT_CAPABILITIES, 'CAP_SYS_ADMIN']).includes('mount'));
    assert.ok(denied([...DEFAULT_CAPABILITIES]).includes('settimeofday'));
    assert.ok(!denied([...DEFAULT_CAPABILITIES, 'CAP_SYS_TIME']).includes('settimeofday'));
    const cloneRules = (caps: string[]) =>
      defaultSeccompProfile(caps).syscalls.filter((r) => r.names[0] === 'clone');
    assert.equal(cloneRules([...DEFAULT_CAPABILITIES]).length, 7);
    assert.equal(cloneRules(['CAP_SYS_ADMIN']).length, 0);
  });
});

describe('config.json', () => {
  const config = buildOciConfig(base, paths) as {
    hostname: string;
    root: { path: string };
    process: { args: string[]; noNewPrivileges: boolean; capabilities: { bounding: string[] } };
    mounts: { destination: string; options?: string[]; source: string }[];
    linux: {
      namespaces: { type: string }[];
      cgroupsPath: string;
      resources: {
        memory: { limit: number };
        cpu: { quota: number; period: number };
        pids: { limit: number };
      };
      maskedPaths: string[];
      readonlyPaths: string[];
    };
  };

  test('resources come from cpus, memoryMib and pidsLimit', () => {
    assert.deepEqual(config.linux.resources.cpu, { quota: 150_000, period: 100_000 });
    assert.equal(config.linux.resources.memory.limit, 512 * 1024 * 1024);
    assert.equal(config.linux.resources.pids.limit, 256);
    assert.equal(config.linux.cgroupsPath, '/seed-sandbox/01JABCDEF');
  });

  test('namespaces, hostname, init, no_new_privs, masked and read-only paths', () => {
    assert.deepEqual(config.linux.namespaces.map((n) => n.type).sort(), [
      'cgroup',
      'ipc',
      'mount',
      'network',
      'pid',
      'uts',
    ]);
    assert.equal(config.hostname, 'web');
    assert.deepEqual(config.process.args, ['/.sandbox/init', '-P']);
    assert.equal(config.process.noNewPrivileges, true);
    assert.ok(config.linux.maskedPaths.includes('/proc/kcore'));
    assert.ok(config.linux.readonlyPaths.includes('/proc/sys'));
    assert.equal(config.root.path, paths.rootfs);
  });

  test('bind mounts keep their read-only flag; the init and the tty helper are bound read-only', () => {
    const data = config.mounts.find((m) => m.destination === '/mnt/data');
    assert.equal(data?.source, '/data');
    assert.ok(data?.options?.includes('ro'));
    const init = config.mounts.find((m) => m.destination === '/.sandbox/init');
    assert.ok(init?.options?.includes('ro'));
    const helper = config.mounts.find((m) => m.destination === '/.sandbox/busybox');
    assert.equal(helper?.source, '/bin/busybox');
    assert.ok(helper?.options?.includes('ro') && helper.options.includes('nosuid'));
    const { ttyHelper: _, ...withoutHelper } = paths;
    const plain = buildOciConfig(base, withoutHelper) as typeof config;
    assert.equal(
      plain.mounts.find((m) => m.destination === '/.sandbox/busybox'),
      undefined,
    );
  });
});

describe('validateSpec', () => {
  const cases: [Partial<EngineBoxSpec>, RegExp][] = [
    [{ id: 'a b' }, /^id:/],
    [{ cpus: Number.NaN }, /^cpus:/],
    [{ memoryMib: 0 }, /^memoryMib:/],
    [{ pidsLimit: 0 }, /^pidsLimit:/],
    [{ diskSizeGb: 0 }, /^diskSizeGb:/],
    [{ workingDir: 'root' }, /^workingDir:/],
    [{ hostname: 'has space' }, /^hostname:/],
    [{ boxDir: '/a,b' }, /^boxDir:/],
    [{ layerDirs: [] }, /^layerDirs:/],
    [{ layerDirs: ['/ok', '/bad:colon'] }, /^layerDirs\[1\]:/],
    [{ mounts: [{ hostPath: '/x', guestPath: '/', readOnly: false }] }, /^mounts\[0\]\.guestPath:/],
    [{ mounts: [{ hostPath: '/x', guestPath: '/.sandbox/init', readOnly: false }] }, /reserved/],
    [{ mounts: [{ hostPath: '/x', guestPath: '/.sandbox/busybox', readOnly: true }] }, /reserved/],
  ];
  for (const [o, re] of cases) {
    test(`rejects ${JSON.stringify(o)}`, () => {
      assert.throws(
        () => validateSpec({ ...base, ...o }),
        (e: Error) => e instanceof BoxError && re.test(e.message),
      );
    });
  }
  test('accepts a valid spec', () => {
    validateSpec(base);
  });
});
