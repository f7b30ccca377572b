/**
 * Rootless boxes (issue 16): runs `rootless-suite.ts` as the unprivileged account `sbxuser` (prepared
 * by `npm run test:setup`: `sandbox setup sbxuser`), and checks from root that the host is untouched:
 * no new mounts, no process of that account left, no cgroup left in its delegated subtree, the
 * subordinate id files unchanged, nothing in root's own cgroup tree of the sandbox.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
// internal: the user lookup names the rootless test user
import { lookupUser } from '../src/cli/doctor.ts';
import {
  cgroupDelegation,
  cgroupMounts,
  hostMounts,
  ROOTLESS_TEST_USER,
  startedByOtherTestFile,
} from './rootless-helpers.ts';
import { ensureRegistry } from './runtime-helpers.ts';

const suite = join(import.meta.dirname, 'rootless-suite.ts');

/**
 * Pids of processes owned by `uid`, but those another test file runs as the same account meanwhile
 * (escape/hostile-rootless, the doctor of rootless-cli: `startedByOtherTestFile`).
 */
function processesOf(uid: number): string[] {
  return readdirSync('/proc').filter((p) => {
    if (!/^\d+$/.test(p)) return false;
    try {
      return statSync(`/proc/${p}`).uid === uid && !startedByOtherTestFile(p, 'rootless');
    } catch {
      return false;
    }
  });
}

/** The names in directory `dir`, or none when it does not exist (any more). */
function listOrNone(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/** The text of `file`, or '' when it does not exist (any more) or its parent is not a directory. */
function readOrEmpty(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return '';
    throw error;
  }
}

describe('rootless boxes, as an ordinary account', () => {
  before(() => ensureRegistry());

  it(`the rootless suite passes as ${ROOTLESS_TEST_USER}, and the host is untouched`, () => {
    const user = lookupUser(ROOTLESS_TEST_USER);
    assert.ok(user, `${ROOTLESS_TEST_USER} is missing: run npm run test:setup -w @seed/sandbox`);
    const mountsBefore = hostMounts();
    const idsBefore = [readFileSync('/etc/subuid', 'utf8'), readFileSync('/etc/subgid', 'utf8')];
    const leftoverBefore = processesOf(user.uid);
    const r = spawnSync(
      'runuser',
      [
        '-u',
        user.name,
        '--',
        // A clean environment: the parent's test-runner variables would turn the child into a subtest.
        'env',
        '-i',
        `HOME=${user.home}`,
        `PATH=${process.env.PATH ?? '/usr/bin:/bin'}`,
        process.execPath,
        '--conditions=seed-source',
        '--test',
        '--test-reporter=spec',
        suite,
      ],
      { encoding: 'utf8', cwd: '/', timeout: 540_000 },
    );
    assert.equal(r.status, 0, `rootless suite failed:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /ℹ pass 12\b/, r.stdout);
    assert.match(r.stdout, /ℹ fail 0\b/);

    // Nothing of the boxes is mounted on the host: their mounts lived in their own namespaces. Mounts
    // the root engine makes for boxes of other test files running meanwhile (their gateway netns, box
    // directories, the brief mount of a new disk template, and the gVisor tier's namespace pair its
    // first box of the boot makes; never under this account's home) come and go and are left out of the
    // comparison.
    const ours = (m: string) =>
      m.startsWith(`${user.home}/`) ||
      !(
        /^\/run\/netns\/sbx-/.test(m) ||
        /^\/run\/seed-sandbox-gvisor\/(userns|netns)$/.test(m) ||
        /\/boxes\/[0-9A-Za-z_-]+\//.test(m) ||
        /\/engine\/disks\/mnt-[^/]+$/.test(m)
      );
    assert.deepEqual(hostMounts().filter(ours), mountsBefore.filter(ours));
    assert.deepEqual([readFileSync('/etc/subuid', 'utf8'), readFileSync('/etc/subgid', 'utf8')], idsBefore);
    // Box inits killed at removal are reaped by this VM's PID 1 about 1.6 s later (zombies until then).
    const deadline = Date.now() + 10_000;
    while (processesOf(user.uid).length > leftoverBefore.length && Date.now() < deadline) {
      spawnSync('sleep', ['0.2']);
    }
    assert.deepEqual(processesOf(user.uid), leftoverBefore, 'no process of the account is left');
    const delegation = cgroupDelegation(user, cgroupMounts());
    for (const dir of delegation.dirs.values()) {
      const boxes = readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory());
      assert.deepEqual(
        boxes.map((d) => d.name),
        [],
        `${dir} holds no box cgroup`,
      );
    }
    // The account's boxes never appear in root's own sandbox cgroups. The boxes of other test files come
    // and go meanwhile: a cgroup or process gone between listing and reading is skipped (and so are the
    // tree's own files, which hold no cgroup.procs).
    for (const mount of new Set(cgroupMounts().v1.values())) {
      for (const entry of listOrNone(join(mount, 'seed-sandbox'))) {
        for (const pid of readOrEmpty(join(mount, 'seed-sandbox', entry, 'cgroup.procs')).split('\n')) {
          if (pid === '') continue;
          assert.notEqual(statSync(`/proc/${pid}`, { throwIfNoEntry: false })?.uid, user.uid);
        }
      }
    }
  });
});
