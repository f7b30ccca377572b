/**
 * The rootless suite (issue 16), run by `rootless.test.ts` as the unprivileged account `sbxuser`
 * (`runuser -u sbxuser -- node --test rootless-suite.ts`): `JsRuntime` on the rootless engine — create,
 * exec streams, tty, network disabled/enabled/allowNet, published ports, volumes, limits, detach and
 * reattach, remove with no leftovers, and what an ordinary account is refused.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
// internal: a plain busybox rootfs for the engine-level cases
import { makeBusyboxRootfs } from '../src/engine/rootfs.ts';
// internal: the rootless engine is tested as a unit
import { RootlessEngine } from '../src/engine/rootless.ts';
// internal: the rootless host checks are tested as units
import { cgroupDelegation, cgroupMounts, subordinateRanges } from '../src/engine/rootless-host.ts';
import { JsRuntime } from '../src/index.ts';
// internal: the host's own addresses the box must not reach
import { hostIpv4Addresses } from '../src/network/destinations.ts';
import { buildLayer, pushFixture } from './helpers/registry.ts';
import { processUids } from './rootless-helpers.ts';
import { BUSYBOX, boxDirs, cleanupAll, REGISTRIES, run, tempHome } from './runtime-helpers.ts';

const me = userInfo();
const subuid = subordinateRanges('/etc/subuid', { name: me.username, uid: me.uid })[0]!;

/** A TCP server on the host answering every connection with `text`. */
function hostServer(host: string, text: string): Promise<{ server: Server; port: number }> {
  return new Promise((resolve) => {
    const server = createServer((socket) => socket.end(text));
    server.listen(0, host, () => resolve({ server, port: (server.address() as { port: number }).port }));
  });
}

/**
 * Host pids of this account's processes whose command line (arguments joined by spaces) matches `pattern`
 * (a zombie has none), asked again for up to 10 s until there are none: a removed box's processes and its
 * slirp4netns end a moment after its init.
 */
async function processesLeft(pattern: RegExp): Promise<string[]> {
  const find = () =>
    readdirSync('/proc').filter((p) => {
      try {
        return (
          /^\d+$/.test(p) &&
          pattern.test(readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ')) &&
          statSync(`/proc/${p}`).uid === me.uid
        );
      } catch {
        return false;
      }
    });
  let left = find();
  for (const end = Date.now() + 10_000; left.length > 0 && Date.now() < end; left = find()) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return left;
}

describe(`rootless runtime as ${me.username}`, () => {
  let home: string;
  let runtime: JsRuntime;

  before(() => {
    assert.notEqual(me.uid, 0, 'the rootless suite must run as an ordinary account');
    home = tempHome('sandbox-rootless-');
    runtime = new JsRuntime({ homeDir: home, imageRegistries: REGISTRIES });
  });

  after(async () => {
    await cleanupAll();
  });

  it('creates a box whose root is this account and whose other users are its subordinate ids', async () => {
    const shared = mkdtempSync(join(home, 'shared-'));
    const box = await runtime.create({
      image: BUSYBOX,
      network: { mode: 'disabled' },
      volumes: [{ hostPath: shared, guestPath: '/shared' }],
    });
    const info = await box.info();
    assert.equal(info.state.status, 'running');
    // The box init, seen from the host, runs as this account: never as host root.
    assert.deepEqual(processUids(info.state.pid!), [me.uid, me.uid, me.uid, me.uid]);
    const r = await run(box, 'sh', [
      '-c',
      'id -u; touch /shared/by-root; chown 1000:1000 /shared/by-root; echo done',
    ]);
    assert.equal(r.stdout, '0\ndone');
    assert.equal(statSync(join(shared, 'by-root')).uid, subuid.start + 999);
    const asUser = await box.execWith(
      'sh',
      ['-c', 'id -u; touch /tmp/x && echo wrote'],
      {},
      { user: '1000:1000' },
    );
    const out: string[] = [];
    const stdout = await asUser.stdout();
    for (let l = await stdout.next(); l !== null; l = await stdout.next()) out.push(l);
    assert.deepEqual(out, ['1000', 'wrote']);
    await runtime.remove(box.id, true);
  });

  it('streams stdin, stdout and stderr separately, and passes the exit code', async () => {
    const box = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
    const execution = await box.exec('sh', ['-c', 'read a; echo "out:$a"; echo "err:$a" >&2; exit 3']);
    const stdin = await execution.stdin();
    await stdin.writeString('hello\n');
    const stdout = await execution.stdout();
    const stderr = await execution.stderr();
    assert.equal(await stdout.next(), 'out:hello');
    assert.equal(await stderr.next(), 'err:hello');
    assert.equal((await execution.wait()).exitCode, 3);
    const tty = await run(box, 'sh', ['-c', 'tty; stty size'], undefined, true);
    assert.match(tty.stdout, /^\/dev\/pts\/\d+\r?\n24 80/);
    // A resize reaches the command's terminal (stty runs in the box's user namespace).
    const sized = await box.exec('sh', ['-c', 'read line; stty size'], undefined, true);
    await sized.resize(120, 40);
    await (await sized.stdin()).writeString('go\n');
    const lines = await sized.stdout();
    const seen: string[] = [];
    for (let line = await lines.next(); line !== null; line = await lines.next()) seen.push(line);
    assert.equal((await sized.wait()).exitCode, 0);
    assert.match(seen.join('\n'), /\b40 120\b/);
    await runtime.remove(box.id, true);
  });

  it('network disabled has only lo; enabled reaches the host loopback only when allowNet names it', async () => {
    const { server, port } = await hostServer('127.0.0.1', 'from-host\n');
    const hostIp = hostIpv4Addresses().find((a) => !a.startsWith('127.'));
    const lan = hostIp ? await hostServer(hostIp, 'from-lan\n') : undefined;
    try {
      const off = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
      assert.equal((await run(off, 'sh', ['-c', 'ls /sys/class/net'])).stdout, 'lo');
      await runtime.remove(off.id, true);

      const open = await runtime.create({ image: BUSYBOX });
      assert.match((await run(open, 'sh', ['-c', 'ls /sys/class/net'])).stdout, /tap0/);
      const refused = await run(open, 'sh', ['-c', `nc -w 2 10.0.2.2 ${port} </dev/null; echo rc=$?`]);
      assert.doesNotMatch(refused.stdout, /from-host/);
      if (lan) {
        const toLan = await run(open, 'sh', ['-c', `nc -w 2 ${hostIp} ${lan.port} </dev/null; echo rc=$?`]);
        assert.doesNotMatch(toLan.stdout, /from-lan/, 'the host is not a destination unless named');
      }
      await runtime.remove(open.id, true);

      const allowed = await runtime.create({
        image: BUSYBOX,
        network: { mode: 'enabled', allowNet: ['host.sandbox.internal'] },
      });
      const reached = await run(allowed, 'sh', ['-c', `nc -w 3 10.0.2.2 ${port} </dev/null`]);
      assert.equal(reached.stdout, 'from-host');
      if (lan) {
        const toLan = await run(allowed, 'sh', [
          '-c',
          `nc -w 2 ${hostIp} ${lan.port} </dev/null; echo rc=$?`,
        ]);
        assert.doesNotMatch(toLan.stdout, /from-lan/, 'unlisted destinations are refused');
      }
      await runtime.remove(allowed.id, true);
    } finally {
      server.close();
      lan?.server.close();
    }
  });

  it('publishes a box port as a listener of this account; a port below the unprivileged start is refused', async () => {
    const box = await runtime.create({ image: BUSYBOX, ports: [{ guestPort: 8080 }] });
    const published = (await box.info()).network!.publishedPorts!;
    assert.equal(published.length, 1);
    const hostPort = published[0]!.hostPort;
    await run(box, 'sh', [
      '-c',
      'mkdir -p /www && echo from-box > /www/index.html && (httpd -p 8080 -h /www &)',
    ]);
    let body = '';
    for (let i = 0; i < 150 && body === ''; i++) {
      body = await fetch(`http://127.0.0.1:${hostPort}/`).then(
        (r) => r.text(),
        () => '',
      );
      if (body === '') await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(body, 'from-box\n');
    await runtime.remove(box.id, true);
    const start = Number(readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8'));
    if (start > 80) {
      await assert.rejects(runtime.create({ image: BUSYBOX, ports: [{ guestPort: 80, hostPort: 80 }] }), {
        code: 'invalid_option',
        field: 'ports[0].hostPort',
      });
    }
  });

  it('binds a directory this account owns; refuses a host path it cannot read', async () => {
    const dir = mkdtempSync(join(home, 'vol-'));
    writeFileSync(join(dir, 'in.txt'), 'host data\n');
    const box = await runtime.create({
      image: BUSYBOX,
      network: { mode: 'disabled' },
      volumes: [{ hostPath: dir, guestPath: '/data' }],
    });
    const r = await run(box, 'sh', ['-c', 'cat /data/in.txt; echo box > /data/out.txt']);
    assert.equal(r.stdout, 'host data');
    assert.equal(readFileSync(join(dir, 'out.txt'), 'utf8'), 'box\n');
    assert.equal(statSync(join(dir, 'out.txt')).uid, me.uid);
    await runtime.remove(box.id, true);
    await assert.rejects(
      runtime.create({
        image: BUSYBOX,
        network: { mode: 'disabled' },
        volumes: [{ hostPath: '/root', guestPath: '/x', readOnly: true }],
      }),
      (error: Error & { code?: string }) =>
        /not readable by/.test(error.message) && error.code === 'invalid_option',
    );
    assert.equal(boxDirs(home).length, 0);
  });

  it('enforces cpu, memory and pids limits through the delegated cgroup subtree', async () => {
    const box = await runtime.create({
      image: BUSYBOX,
      network: { mode: 'disabled' },
      memoryMib: 64,
      cpus: 0.5,
    });
    const r = await run(box, 'sh', [
      '-c',
      'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/pids/pids.max',
    ]);
    const [memory, quota] = r.stdout.split('\n');
    assert.equal(Number(memory), 64 * 1024 * 1024);
    assert.equal(Number(quota), 50_000);
    const delegation = cgroupDelegation({ name: me.username, uid: me.uid }, cgroupMounts());
    for (const dir of delegation.dirs.values()) assert.ok(existsSync(join(dir, box.id)), `${dir}/${box.id}`);
    // A memory hog is killed by the limit, not the host.
    const hog = await run(box, 'sh', ['-c', 'head -c 200m /dev/zero | tail > /dev/null; echo "rc=$?"']);
    assert.equal(hog.stdout, 'rc=137', 'tail was killed (SIGKILL) by the memory limit');
    await runtime.remove(box.id, true);
    for (const dir of delegation.dirs.values()) assert.equal(existsSync(join(dir, box.id)), false);
  });

  it('without a delegated cgroup subtree: a box with limits is refused with the fix, or runs unlimited when allowed', async () => {
    const stateRoot = mkdtempSync(join(home, 'engine-'));
    const none = {
      layout: cgroupMounts().layout,
      path: '/nowhere',
      controllers: [],
      missing: ['cpu', 'memory', 'pids'],
      dirs: new Map(),
    };
    const engine = new RootlessEngine({ stateRoot, delegation: () => none });
    const layer = mkdtempSync(join(home, 'layer-'));
    makeBusyboxRootfs(layer);
    const boxDir = mkdtempSync(join(home, 'box-'));
    const spec = {
      id: 'unlimited1',
      hostname: 'unlimited1',
      layerDirs: [layer],
      boxDir,
      env: ['PATH=/bin'],
      workingDir: '/',
      cpus: 1,
      memoryMib: 64,
      pidsLimit: 64,
      mounts: [],
      capabilities: { add: [], drop: [] },
      network: { mode: 'disabled' as const, allowNet: [] },
      detach: false,
    };
    await assert.rejects(
      engine.start(spec),
      (e: Error & { code?: string }) =>
        e.code === 'unsupported' &&
        e.message.includes(`sudo sandbox setup ${me.username}`) &&
        /allowUnlimited/.test(e.message),
    );
    await engine.start({ ...spec, allowUnlimited: true });
    assert.equal(engine.limitsEnforced('unlimited1'), false);
    const p = await engine.exec('unlimited1', {
      cmd: 'cat',
      args: ['/sys/fs/cgroup/memory/memory.limit_in_bytes'],
      env: [],
    });
    let out = '';
    p.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    assert.equal(await p.exited, 0);
    assert.notEqual(Number(out.trim()), 64 * 1024 * 1024, 'no memory limit was set');
    await engine.remove('unlimited1', boxDir);
    await assert.rejects(
      runtime.create({ image: BUSYBOX, advanced: { allowUnlimited: 'yes' as unknown as boolean } }),
      {
        code: 'invalid_option',
        field: 'advanced.allowUnlimited',
      },
    );
  });

  it('a detached box outlives its creator and is driven by another process', async () => {
    const script = join(home, 'create-detached.ts');
    writeFileSync(
      script,
      `import { JsRuntime } from ${JSON.stringify(join(import.meta.dirname, '..', 'src', 'index.ts'))};
const rt = new JsRuntime({ homeDir: ${JSON.stringify(home)}, imageRegistries: ${JSON.stringify(REGISTRIES)} });
const box = await rt.create({ image: 'busybox:latest', detach: true, network: { mode: 'disabled' } }, 'detached-one');
process.stdout.write(box.id);\n`,
    );
    const child = spawnSync(process.execPath, ['--conditions=seed-source', script], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(child.status, 0, child.stderr);
    const box = await runtime.get('detached-one');
    assert.ok(box);
    assert.equal(box.id, child.stdout);
    assert.equal((await run(box, 'echo', ['still here'])).stdout, 'still here');
    await runtime.remove('detached-one', true);
    assert.equal(await runtime.get('detached-one'), null);
  });

  it('a box that is not detached stops when its creator is killed (SIGKILL), slirp4netns with it', async () => {
    const script = join(home, 'create-attached.ts');
    writeFileSync(
      script,
      `import { JsRuntime } from ${JSON.stringify(join(import.meta.dirname, '..', 'src', 'index.ts'))};
const rt = new JsRuntime({ homeDir: ${JSON.stringify(home)}, imageRegistries: ${JSON.stringify(REGISTRIES)} });
const box = await rt.create({ image: 'busybox:latest' }, 'attached-one');
process.stdout.write(box.id + '\\n');
setInterval(() => {}, 1000);\n`,
    );
    const child = spawn(process.execPath, ['--conditions=seed-source', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const id = await new Promise<string>((resolve) =>
      child.stdout.once('data', (c: Buffer) => resolve(c.toString().trim())),
    );
    const info = await runtime.getInfo(id);
    assert.equal(info?.state.status, 'running');
    const init = info!.state.pid!;
    child.kill('SIGKILL');
    // The init runs until its stat is gone (reaped) or says zombie/dead; read without an existence check
    // first, which it could pass just before it is reaped.
    const running = () => {
      try {
        return !/\) [ZX] /.test(readFileSync(`/proc/${init}/stat`, 'utf8'));
      } catch {
        return false;
      }
    };
    const deadline = Date.now() + 10_000;
    while (running() && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal((await runtime.getInfo(id))?.state.status, 'stopped');
    assert.deepEqual(await processesLeft(/^slirp4netns/), [], 'no slirp4netns of this account is left');
    await runtime.remove(id, true);
  });

  it("unpacks whiteouts and opaque directories into this account's store, and the box sees the merged layers", async () => {
    const base = await buildLayer([
      { name: 'bin/', type: 'directory' },
      { name: 'bin/busybox', content: readFileSync('/bin/busybox'), mode: 0o755 },
      { name: 'bin/sh', type: 'symlink', linkname: 'busybox' },
      { name: 'bin/ls', type: 'symlink', linkname: 'busybox' },
      { name: 'a/', type: 'directory' },
      { name: 'a/gone', content: 'deleted above' },
      { name: 'a/kept', content: 'kept' },
      { name: 'd/', type: 'directory' },
      { name: 'd/old', content: 'hidden by opaque' },
    ]);
    const top = await buildLayer([
      { name: 'a/.wh.gone' },
      { name: 'd/', type: 'directory' },
      { name: 'd/.wh..wh..opq' },
      { name: 'd/new', content: 'new' },
    ]);
    const pushed = await pushFixture(`rootless-layers-${me.uid}`, [base, top]);
    const box = await runtime.create({ image: pushed.reference, network: { mode: 'disabled' } });
    const r = await run(box, 'sh', ['-c', 'ls /a; echo --; ls /d']);
    assert.equal(r.stdout, 'kept\n--\nnew');
    await runtime.remove(box.id, true);
  });

  it('refuses what needs root with a clear error: the gVisor tier and diskSizeGb', async () => {
    await assert.rejects(
      runtime.create({ image: BUSYBOX, isolation: 'gvisor' }),
      (e: Error & { code?: string }) => e.code === 'unsupported' && /gvisor/.test(e.message),
    );
    await assert.rejects(
      runtime.create({ image: BUSYBOX, diskSizeGb: 1 }),
      (e: Error & { code?: string }) => e.code === 'unsupported' && /diskSizeGb/.test(e.message),
    );
    assert.equal(boxDirs(home).length, 0);
  });

  it('leaves nothing behind: no box process, cgroup, slirp4netns or file of the removed boxes', async () => {
    const boxes = await Promise.all([
      runtime.create({ image: BUSYBOX }),
      runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } }),
    ]);
    for (const box of boxes) await run(box, 'sh', ['-c', 'sleep 100 & echo started']);
    for (const box of boxes) await runtime.remove(box.id, true);
    assert.deepEqual(boxDirs(home), []);
    assert.deepEqual(
      await processesLeft(/catatonit|\.sandbox\/init|slirp4netns|rootless-supervisor|sleep 100/),
      [],
    );
    const delegation = cgroupDelegation({ name: me.username, uid: me.uid }, cgroupMounts());
    for (const dir of delegation.dirs.values()) {
      const children = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory());
      assert.deepEqual(
        children.map((d) => d.name),
        [],
        dir,
      );
    }
  });
});
