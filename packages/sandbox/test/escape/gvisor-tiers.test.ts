/**
 * Escape suite, both isolation tiers: the same attack cases run in a `container` box (crun/runc)
 * and in a `gvisor` box (runsc), each followed by the host-untouched assertions of `helpers.ts`
 * (marker files, host mounts, host listeners, box processes left behind). Cases: host files through
 * `/proc` and `..`, writes to `/proc/sys` and `/proc/sysrq-trigger`, device nodes, mounts, packet
 * sockets, a stale host bind at a box's bind target, a fork bomb and a memory bomb. The gVisor tier
 * is skipped only when runsc is missing.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
// internal: the tiered engine is tested as a unit
import { createTieredEngine, type IsolationTier, type TieredEngine } from '../../src/engine/gvisor-tiers.ts';
// internal: boxes are made with the engine directly
import { makeBusyboxRootfs } from '../../src/engine/index.ts';
// internal: boxes are made with the engine directly
import type { EngineBoxSpec } from '../../src/engine/types.ts';
import { execSh, specFactory } from '../helpers/engine.ts';
import { GVISOR_SKIP } from '../runtime-helpers.ts';
import { assertHostUntouched, type HostMarker, makeHostMarker, snapshotHost } from './helpers.ts';

const tmp = mkdtempSync(join(tmpdir(), 'escape-tiers-'));
const rootfs = makeBusyboxRootfs(join(tmp, 'layer'));
let engine: TieredEngine;
let marker: HostMarker;

before(async () => {
  engine = await createTieredEngine({ stateRoot: join(tmp, 'state'), gvisorPlatform: 'ptrace' });
  marker = makeHostMarker(tmp);
});
after(async () => {
  for (const b of (await engine?.list().catch(() => [])) ?? [])
    await engine.remove(b.id, b.boxDir ?? join(tmp, 'boxes', b.id)).catch(() => {});
  rmSync(tmp, { recursive: true, force: true });
});

/** Host sysctls a box must not change (global, not namespaced). */
const HOST_SYSCTLS = [
  '/proc/sys/kernel/core_pattern',
  '/proc/sys/vm/overcommit_memory',
  '/proc/sys/kernel/panic',
];

function hostSysctls(): string[] {
  return HOST_SYSCTLS.map((p) => readFileSync(p, 'utf8'));
}

/**
 * The attack cases of one tier. Each starts a fresh box, runs the attack, removes the box and asserts
 * the host untouched.
 */
function attackCases(tier: IsolationTier): void {
  const skip = tier === 'gvisor' ? GVISOR_SKIP : false;
  const spec = specFactory(tmp, rootfs, tier === 'gvisor' ? 'escg' : 'escc', {
    isolation: tier,
    memoryMib: 64,
    pidsLimit: 64,
  });

  /** Runs `attack` in a fresh box and checks the host afterwards; returns the attack's output. */
  async function inBox(
    attack: string,
    overrides: Partial<EngineBoxSpec> = {},
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    const before = snapshotHost({ paths: [marker.dir] });
    const sysctls = hostSysctls();
    const s = spec(overrides);
    await engine.start(s);
    let result: { code: number; stdout: string; stderr: string };
    try {
      result = await execSh(engine as never, s.id, attack);
    } finally {
      await engine.remove(s.id, s.boxDir);
    }
    assertHostUntouched(before, { allowMountsUnder: [tmp] });
    assert.deepEqual(hostSysctls(), sysctls, 'host sysctls changed');
    assert.ok(!result.stdout.includes(marker.secret), 'the box read a host secret');
    return result;
  }

  describe(`escape attempts, ${tier} tier`, { skip }, () => {
    test('host files: /proc/1/root, /proc/*/root, .. and /proc/*/cwd stay inside the box', async () => {
      const r = await inBox(
        `for p in /proc/1/root${marker.dir} /proc/self/root/../../..${marker.dir} ${marker.dir}; do
           cat "$p/secret" 2>/dev/null && echo "LEAK $p"; echo pwned > "$p/etc/passwd" 2>/dev/null && echo "WROTE $p"
         done
         for d in /proc/[0-9]*; do cat "$d/root${marker.dir}/secret" "$d/cwd${marker.dir}/secret" 2>/dev/null; done
         ls /proc | grep -c '^[0-9]'`,
      );
      assert.doesNotMatch(r.stdout, /LEAK|WROTE/);
      // Only the box's own processes are visible (init, sh, ls, grep and a few helpers), not the host's.
      assert.ok(Number(r.stdout.trim().split('\n').at(-1)) < 20, r.stdout);
    });

    test('/proc/sys and /proc/sysrq-trigger writes do not reach the host', async () => {
      const r = await inBox(
        `echo '|/tmp/pwn' > /proc/sys/kernel/core_pattern 2>/dev/null && echo WROTE-core
         echo 1 > /proc/sys/vm/overcommit_memory 2>/dev/null && echo WROTE-vm
         echo 7 > /proc/sys/kernel/panic 2>/dev/null && echo WROTE-panic
         echo h > /proc/sysrq-trigger 2>/dev/null && echo WROTE-trigger
         exit 0`,
      );
      // Host values are compared by inBox; in gVisor the writes go to the Sentry's own /proc at most.
      if (tier === 'container') assert.doesNotMatch(r.stdout, /WROTE/);
    });

    test('device nodes: no host disk or memory through mknod, /dev/mem or /dev/kmsg', async () => {
      const r = await inBox(
        `mknod /tmp/sda b 8 0 2>/dev/null && head -c 512 /tmp/sda >/dev/null 2>&1 && echo READ-disk
         mknod /tmp/mem c 1 1 2>/dev/null && head -c 16 /tmp/mem >/dev/null 2>&1 && echo READ-mem
         head -c 16 /dev/mem >/dev/null 2>&1 && echo READ-devmem
         [ -c /dev/kmsg ] && echo pwn > /dev/kmsg 2>/dev/null && echo WROTE-kmsg
         ls /dev`,
      );
      assert.doesNotMatch(r.stdout, /READ-|WROTE-/);
      assert.doesNotMatch(r.stdout, /^(sda|vda|mem)$/m);
    });

    test('mounts: proc, tmpfs and bind mounts are refused; the host mount table is unchanged', async () => {
      const r = await inBox(
        `mkdir -p /mnt/a /mnt/b
         mount -t tmpfs none /mnt/a 2>/dev/null && echo MOUNTED-tmpfs
         mount -t proc proc /mnt/b 2>/dev/null && echo MOUNTED-proc
         mount --bind / /mnt/a 2>/dev/null && echo MOUNTED-bind
         umount /proc 2>/dev/null && echo UNMOUNTED-proc
         exit 0`,
      );
      assert.doesNotMatch(r.stdout, /MOUNTED|UNMOUNTED/);
    });

    test('packet sockets (arping on an interface) are refused', async () => {
      const r = await inBox('arping -c 1 -w 1 -I lo 127.0.0.1 >/dev/null 2>&1 && echo RAW-OK; exit 0');
      assert.doesNotMatch(r.stdout, /RAW-OK/);
    });

    test('a start never deletes through a host directory still bound at one of its bind targets', async () => {
      // A stale bind of a host directory at <boxDir>/binds/0 (as a crash mid-start could leave): the
      // container tier unmounts whatever is under the box directory before it starts; the gVisor tier
      // refuses to start. Neither removes the bind target recursively, which would empty the host
      // directory through the mount.
      const before = snapshotHost({ paths: [marker.dir] });
      const s = spec();
      const target = join(s.boxDir, 'binds', '0');
      mkdirSync(target, { recursive: true });
      const bound = spawnSync('mount', ['--bind', marker.dir, target], { encoding: 'utf8' });
      assert.equal(bound.status, 0, bound.stderr);
      try {
        if (tier === 'container') await engine.start(s);
        else await assert.rejects(engine.start(s), /binds\/0 is still mounted/);
        assert.equal(readFileSync(join(marker.dir, 'secret'), 'utf8'), marker.secret);
      } finally {
        await engine.remove(s.id, s.boxDir);
      }
      assertHostUntouched(before, { allowMountsUnder: [tmp] });
    });

    test('a fork bomb stays in its box (pids limit); the host keeps running and nothing is left', async () => {
      // Either forks fail at the box's pids limit (container) or the sandbox ends when the Sentry
      // cannot create host threads (gVisor); inBox checks the host and that nothing is left either way.
      await inBox('bomb() { bomb | bomb & }; (bomb) 2>/dev/null & sleep 2; echo survived');
    });

    test('a memory bomb is stopped at the box limit', async () => {
      const r = await inBox(`x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo ALLOCATED \${#x}`, {
        memoryMib: 48,
      });
      assert.doesNotMatch(r.stdout, /ALLOCATED 268435456/);
    });
  });
}

attackCases('container');
attackCases('gvisor');
