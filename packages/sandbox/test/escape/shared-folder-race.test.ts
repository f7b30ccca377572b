/**
 * Escape suite, shared folders: a box that writes a host directory bound into it (a `hostPath`
 * volume) flips entries of that directory between a directory, a file and a symlink to host files
 * in a tight loop while the host runs `copyIn` from it and `copyOut` into it, many times. The host
 * side of a copy holds directory descriptors and never follows a symlink below the named path
 * (src/runtime/files/host.ts), so: the canary tree outside the shared folder is unchanged (hash
 * before and after), and no host-only byte ever reaches the box. A copy that meets a swapped entry
 * may fail, with `conflict` or `not_found` only. A path named inside the shared folder is walked
 * from the folder itself, so a parent the box made a symlink is refused rather than followed. Both isolation tiers (gVisor's box side runs inside
 * the box, its host side is the same).
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BoxError, type JsBox, type JsExecution, JsRuntime } from '../../src/index.ts';
import {
  BUSYBOX,
  cleanupAll,
  ensureRegistry,
  GVISOR_SKIP,
  REGISTRIES,
  run,
  tempHome,
} from '../runtime-helpers.ts';
import { assertHostUntouched, type HostMarker, makeHostMarker, snapshotHost } from './helpers.ts';

/**
 * Per tier: host copies each way, and files in each flipped directory (many, so that a copy is inside
 * one while it flips). A gVisor box's file operations each cost a `runsc exec`: fewer of both.
 */
const TIERS = [
  { isolation: 'container', rounds: 30, files: 60 },
  { isolation: 'gvisor', rounds: 4, files: 8 },
] as const;
const tmp = mkdtempSync(join(tmpdir(), 'escape-shared-'));
let marker: HostMarker;
const gvisorSkip = GVISOR_SKIP;

/**
 * The box's flipper: under /shared/in and /shared/out, `d` is renamed back and forth between a
 * directory (holding `files` files and one named like the canary's `secret`) and a symlink to the
 * host canary directory (absolute, or climbing relative), and `f` between a file and a symlink to
 * the canary's secret, until /shared/stop exists.
 */
function flipper(canary: string, files: number): string {
  const up = `${'../'.repeat(12)}${canary.slice(1)}`;
  const setup = (base: string, link: string) =>
    [
      `mkdir -p ${base}/d`,
      `for n in $(seq 1 ${files}); do echo box > ${base}/d/f$n; done`,
      `echo box > ${base}/d/secret`,
      `echo box > ${base}/f`,
      `ln -s ${link} ${base}/L`,
      `ln -s ${canary}/secret ${base}/S`,
    ].join('; ');
  const flip = (base: string) =>
    `mv ${base}/d ${base}/D; mv ${base}/L ${base}/d; mv ${base}/f ${base}/F; mv ${base}/S ${base}/f; ` +
    `mv ${base}/d ${base}/L; mv ${base}/D ${base}/d; mv ${base}/f ${base}/S; mv ${base}/F ${base}/f`;
  return [
    setup('/shared/in', canary),
    setup('/shared/out', up),
    'i=0',
    `while [ ! -e /shared/stop ] && [ $i -lt 1000000 ]; do ${flip('/shared/in')}; ${flip('/shared/out')}; i=$((i+1)); done`,
    'echo $i > /shared/flips',
  ].join('; ');
}

function allowedFailure(error: unknown): boolean {
  return error instanceof BoxError && (error.code === 'conflict' || error.code === 'not_found');
}

before(() => {
  ensureRegistry();
  marker = makeHostMarker(tmp);
});

after(async () => {
  await cleanupAll();
  rmSync(tmp, { recursive: true, force: true });
});

for (const tier of TIERS) {
  describe(`a box racing copyIn/copyOut in a shared folder (${tier.isolation} tier)`, {
    skip: tier.isolation === 'gvisor' ? gvisorSkip : false,
  }, () => {
    const shared = join(tmp, `shared-${tier.isolation}`);
    let runtime: JsRuntime;
    let box: JsBox;

    before(async () => {
      mkdirSync(shared);
      chmodSync(shared, 0o777); // the box's root is an unprivileged host uid
      if (tier.isolation === 'gvisor') process.env.SEED_SANDBOX_GVISOR_PLATFORM = 'ptrace';
      runtime = new JsRuntime({
        homeDir: tempHome('escape-shared-home-'),
        imageRegistries: REGISTRIES,
        isolation: tier.isolation,
      });
      box = await runtime.create({
        image: BUSYBOX,
        network: { mode: 'disabled' },
        volumes: [{ hostPath: shared, guestPath: '/shared', readOnly: false }],
      });
      // What copyOut sends into the shared folder: a directory `d` with files and a file `f`.
      await run(box, 'sh', [
        '-c',
        `mkdir -p /src/d && for n in $(seq 1 ${tier.files}); do echo out > /src/d/f$n; done && echo out > /src/d/secret && echo out > /src/f`,
      ]);
    });

    after(async () => {
      await runtime?.remove(box.id, true).catch(() => {});
    });

    test('a path named inside the shared folder is walked from it: a planted parent symlink is refused', async () => {
      const hostBefore = snapshotHost({ paths: [marker.dir] });
      const up = `${'../'.repeat(12)}${marker.dir.slice(1)}`;
      await run(box, 'sh', ['-c', `ln -sfn ${marker.dir} /shared/abs && ln -sfn ${up} /shared/rel`]);
      for (const link of ['abs', 'rel']) {
        // One attempt at a time: each is started only when the previous one has been refused.
        for (const attempt of [
          () => box.copyIn(join(shared, link, 'secret'), `/leak-${link}`),
          () => box.copyIn(join(shared, link, 'etc', 'passwd'), `/leak-${link}-passwd`),
          () => box.copyOut('/src/f', join(shared, link, 'secret')),
          () => box.copyOut('/src/d', join(shared, link, 'etc', 'newdir')),
        ]) {
          await assert.rejects(attempt(), (e: unknown) => e instanceof BoxError && e.code === 'conflict');
        }
        assert.equal((await run(box, 'ls', ['/'])).stdout.includes(`leak-${link}`), false);
      }
      assertHostUntouched(hostBefore, { allowMountsUnder: [tmp, tmpdir()] });
    });

    test('the host canary is unchanged and no host-only file reaches the box', async () => {
      const hostBefore = snapshotHost({ paths: [marker.dir] });
      const flips: JsExecution = await box.exec('sh', ['-c', flipper(marker.dir, tier.files)]);
      // The flipper has laid its entries out once `L` of /shared/out exists.
      for (let i = 0; i < 400 && (await run(box, 'test', ['-L', '/shared/out/L'])).exitCode !== 0; i++);
      let copiedIn = 0;
      let copiedOut = 0;
      try {
        for (let i = 0; i < tier.rounds; i++) {
          try {
            await box.copyIn(join(shared, 'in'), `/got/${i}`);
            copiedIn++;
          } catch (error) {
            if (!allowedFailure(error)) throw error;
          }
          try {
            await box.copyOut('/src', join(shared, 'out'), { includeParent: false });
            copiedOut++;
          } catch (error) {
            if (!allowedFailure(error)) throw error;
          }
        }
      } finally {
        await run(box, 'touch', ['/shared/stop']);
        await flips.wait();
      }
      const flipped = Number((await run(box, 'cat', ['/shared/flips'])).stdout);
      assert.ok(flipped > 0, 'the box flipped the shared entries while the host copied');
      assert.ok(copiedIn + copiedOut > 0, 'some copies completed between the flips');

      assertHostUntouched(hostBefore, { allowMountsUnder: [tmp, tmpdir()] });
      // Nothing of the canary in the box: not its secret, not its passwd, not its CA bundle.
      for (const needle of [marker.secret, 'markeruser', 'MARKER BUNDLE']) {
        const found = await run(box, 'sh', ['-c', `grep -rl '${needle}' /got /shared 2>/dev/null; true`]);
        assert.equal(found.stdout, '', `host-only '${needle}' reached the box: ${found.stdout}`);
      }
    });
  });
}
