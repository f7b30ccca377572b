/**
 * JsBoxOptions defaults and rejections (spec 002 "JsBoxOptions", "Rejections at box creation"), checked
 * on the validator the runtimes share. The same rejections through `JsRuntime.create` are in
 * runtime.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoxError, DEFAULT_CPUS, DEFAULT_MEMORY_MIB, validateBoxOptions } from '../src/index.ts';

function rejects(options: unknown, field: string, pattern: RegExp, context = {}) {
  assert.throws(
    () => validateBoxOptions(options, context),
    (error: unknown) => {
      assert.ok(error instanceof BoxError, 'a BoxError');
      assert.equal(error.field, field);
      assert.match(error.message, new RegExp(field.replace(/[[\].]/g, '\\$&')));
      assert.match(error.message, pattern);
      return true;
    },
  );
}

describe('validateBoxOptions', () => {
  it('applies every default of the spec', () => {
    const o = validateBoxOptions({ image: 'busybox' });
    assert.equal(o.cpus, DEFAULT_CPUS);
    assert.equal(o.cpus, 1);
    assert.equal(o.memoryMib, DEFAULT_MEMORY_MIB);
    assert.equal(o.memoryMib, 512);
    assert.equal(o.workingDir, '/root');
    assert.deepEqual(o.env, []);
    assert.deepEqual(o.volumes, []);
    assert.deepEqual(o.network, { mode: 'enabled', allowNet: [] });
    assert.deepEqual(o.ports, []);
    assert.deepEqual(o.secrets, []);
    assert.deepEqual(o.capabilities, { add: [], drop: [] });
    assert.equal(o.autoRemove, false);
    assert.equal(o.detach, false);
    assert.equal(o.diskSizeGb, undefined);
  });

  it('applies port and secret defaults (tcp, 0.0.0.0, <SECRET:name>)', () => {
    const o = validateBoxOptions({
      image: 'busybox',
      ports: [{ guestPort: 80 }],
      secrets: [{ name: 'TOKEN', value: 's3cret' }],
      advanced: { capabilities: { add: ['net_raw'], drop: ['CAP_CHOWN'] } },
    });
    assert.deepEqual(o.ports, [{ guestPort: 80, protocol: 'tcp', hostIp: '0.0.0.0' }]);
    assert.deepEqual(o.secrets, [
      { name: 'TOKEN', value: 's3cret', hosts: [], placeholder: '<SECRET:TOKEN>' },
    ]);
    assert.deepEqual(o.capabilities, { add: ['CAP_NET_RAW'], drop: ['CAP_CHOWN'] });
  });

  it('rejection 1: a volume with both managedVolume and hostPath, or neither', () => {
    rejects(
      { image: 'busybox', volumes: [{ managedVolume: 'v', hostPath: '/tmp', guestPath: '/d' }] },
      'volumes[0]',
      /exactly one of managedVolume and hostPath/,
    );
    rejects(
      { image: 'busybox', volumes: [{ guestPath: '/a', hostPath: '/tmp' }, { guestPath: '/d' }] },
      'volumes[1]',
      /exactly one/,
    );
  });

  it('rejection 2: readOnly true on a managed volume; false is accepted', () => {
    rejects(
      { image: 'busybox', volumes: [{ managedVolume: 'v', guestPath: '/d', readOnly: true }] },
      'volumes[0].readOnly',
      /managed volume/,
    );
    const o = validateBoxOptions({
      image: 'busybox',
      volumes: [{ managedVolume: 'v', guestPath: '/d', readOnly: false }],
    });
    assert.deepEqual(o.volumes, [{ managedVolume: 'v', guestPath: '/d', readOnly: false }]);
  });

  it('rejection 3: a UDP port mapping, in any case', () => {
    rejects(
      { image: 'busybox', ports: [{ guestPort: 53, protocol: 'udp' }] },
      'ports[0].protocol',
      /UDP is rejected/,
    );
    rejects({ image: 'busybox', ports: [{ guestPort: 53, protocol: 'UDP' }] }, 'ports[0].protocol', /UDP/);
  });

  it('rejection 4: host bind mounts refused when the runtime is remote (REST)', () => {
    const options = { image: 'busybox', volumes: [{ hostPath: '/tmp', guestPath: '/d' }] };
    rejects(options, 'volumes[0].hostPath', /REST runtime/, { allowHostBinds: false });
    assert.equal(validateBoxOptions(options).volumes.length, 1);
  });

  it('names the field and the rule for other invalid values', () => {
    rejects({}, 'image', /one of image and rootfsPath is required/);
    rejects({ image: 'busybox', rootfsPath: '/srv/root' }, 'rootfsPath', /only one/);
    rejects({ rootfsPath: 'relative/dir' }, 'rootfsPath', /absolute/);
    rejects({ image: 'busybox', cpus: 0 }, 'cpus', /positive/);
    rejects({ image: 'busybox', memoryMib: 1.5 }, 'memoryMib', /integer/);
    rejects({ image: 'busybox', diskSizeGb: -1 }, 'diskSizeGb', /positive/);
    rejects({ image: 'busybox', workingDir: 'tmp' }, 'workingDir', /absolute/);
    rejects({ image: 'busybox', env: [{ key: 'A=B', value: '1' }] }, 'env[0].key', /without "="/);
    rejects(
      { image: 'busybox', volumes: [{ hostPath: '/tmp', guestPath: 'd' }] },
      'volumes[0].guestPath',
      /absolute/,
    );
    rejects({ image: 'busybox', network: { mode: 'off' } }, 'network.mode', /'enabled' or 'disabled'/);
    rejects(
      { image: 'busybox', network: { mode: 'disabled', allowNet: ['example.com'] } },
      'network.allowNet',
      /only allowed with mode 'enabled'/,
    );
    rejects({ image: 'busybox', ports: [{ guestPort: 70000 }] }, 'ports[0].guestPort', /1 to 65535/);
    rejects(
      { image: 'busybox', ports: [{ guestPort: 80, hostIp: 'localhost' }] },
      'ports[0].hostIp',
      /IPv4 or IPv6/,
    );
    rejects({ image: 'busybox', secrets: [{ name: 'A' }] }, 'secrets[0].value', /required/);
    rejects(
      { image: 'busybox', advanced: { capabilities: { add: ['not a cap'] } } },
      'advanced.capabilities.add[0]',
      /capability/,
    );
    rejects({ image: 'busybox', detach: 'yes' }, 'detach', /boolean/);
  });
});
