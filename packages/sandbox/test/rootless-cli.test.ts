/**
 * `sandbox doctor` and `sandbox setup` (issue 16). Runs as root: setup is exercised on the account
 * `sbxsetup` with subordinate id files of its own (the real cgroup hierarchies are used and cleaned up),
 * and doctor as the test account `sbxuser`; `npm run test:setup` makes both accounts, so that no test
 * adds or deletes an account (`/etc/passwd`, `/etc/shadow`, `/etc/subuid`) while other test files check
 * those files are unchanged.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
// internal: the doctor and user lookup are called in-process
import { lookupUser, runDoctor } from '../src/cli/doctor.ts';
// internal: the setup command is called in-process
import { runSetup } from '../src/cli/setup.ts';
import {
  cgroupDelegation,
  cgroupMounts,
  delegatedControllers,
  parseRanges,
  SETUP_TEST_USER,
  TEST_FILE_ENV,
} from './rootless-helpers.ts';

const bin = join(import.meta.dirname, '..', 'bin', 'sandbox.ts');
const TEST_USER = 'sbxuser';

describe('sandbox doctor', () => {
  it('reports a missing subordinate range as not ready, with the setup command as its fix', () => {
    const user = lookupUser(TEST_USER);
    assert.ok(user, `${TEST_USER} is missing: run npm run test:setup -w @seed/sandbox`);
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-doctor-test-'));
    try {
      const subuid = join(dir, 'subuid');
      const subgid = join(dir, 'subgid');
      writeFileSync(subuid, 'someone-else:100000:65536\n');
      writeFileSync(subgid, `${TEST_USER}:300000:1000\n`);
      const report = runDoctor({ user, subuidPath: subuid, subgidPath: subgid });
      assert.equal(report.ok, false);
      assert.equal(report.mode, 'rootless');
      const uidCheck = report.checks.find((c) => c.id === 'subuid')!;
      assert.equal(uidCheck.status, 'missing');
      assert.equal(uidCheck.detail, 'no range');
      assert.equal(uidCheck.fix, `sudo sandbox setup ${TEST_USER}`);
      const gidCheck = report.checks.find((c) => c.id === 'subgid')!;
      assert.equal(gidCheck.status, 'missing');
      assert.equal(gidCheck.detail, 'only 1000 ids');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('passes for the prepared test account, as that account (--json, live probes)', () => {
    const r = spawnSync('runuser', ['-u', TEST_USER, '--', process.execPath, bin, 'doctor', '--json'], {
      encoding: 'utf8',
      cwd: '/',
      // The doctor's processes are this file's (rootless.test.ts checks the account's processes meanwhile).
      env: { PATH: process.env.PATH, HOME: lookupUser(TEST_USER)!.home, [TEST_FILE_ENV]: 'rootless-cli' },
      timeout: 30_000,
    });
    const report = JSON.parse(r.stdout);
    const missing = report.checks.filter((c: { status: string }) => c.status === 'missing');
    assert.deepEqual(missing, [], r.stdout);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(report.user, TEST_USER);
    const ids = report.checks.map((c: { id: string }) => c.id);
    for (const id of [
      'kernel',
      'userns',
      'overlay-userns',
      'newuidmap',
      'subuid',
      'subgid',
      'cgroup',
      'crun',
    ]) {
      assert.ok(ids.includes(id), `check ${id} present`);
    }
    assert.equal(
      report.checks.find((c: { id: string }) => c.id === 'overlay-userns').detail,
      'mounted in a user namespace',
    );
  });

  it('exits 1 for an account that is not set up (nobody: no subordinate ids, no cgroup subtree)', () => {
    const r = spawnSync(process.execPath, [bin, 'doctor', '--user', 'nobody', '--json'], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 1, r.stderr);
    const report = JSON.parse(r.stdout);
    assert.equal(report.ok, false);
    const missing = report.checks
      .filter((c: { status: string }) => c.status === 'missing')
      .map((c: { id: string }) => c.id);
    assert.ok(
      missing.includes('subuid') && missing.includes('subgid') && missing.includes('cgroup'),
      missing.join(','),
    );
    for (const c of report.checks.filter((x: { status: string }) => x.status === 'missing')) {
      assert.ok(typeof c.fix === 'string' && c.fix.length > 0, `${c.id} has a fix`);
    }
  });

  it('prints ok/missing lines with fixes in text form', () => {
    const r = spawnSync(process.execPath, [bin, 'doctor', '--user', TEST_USER], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`^sandbox doctor: ${TEST_USER} \\(uid \\d+, rootless\\)$`, 'm'));
    assert.match(r.stdout, /^ok +delegated cgroup subtree \(cpu, memory, pids limits\)/m);
    assert.match(r.stdout, /^ready$/m);
  });
});

/** Removes the cgroup subtree `sandbox setup` delegated to `name`, if any. */
function removeDelegation(name: string): void {
  const user = lookupUser(name);
  if (!user) return;
  for (const dirPath of cgroupDelegation(user, cgroupMounts()).dirs.values()) {
    if (existsSync(dirPath)) rmdirSync(dirPath);
  }
}

describe('sandbox setup', () => {
  const name = SETUP_TEST_USER;
  let dir: string;
  let subuid: string;
  let subgid: string;

  before(() => {
    assert.ok(lookupUser(name), `${name} is missing: run npm run test:setup -w @seed/sandbox`);
    // A run that was killed may have left the delegation; the plan below starts from none.
    removeDelegation(name);
    dir = mkdtempSync(join(tmpdir(), 'sandbox-setup-test-'));
    subuid = join(dir, 'subuid');
    subgid = join(dir, 'subgid');
    // Existing entries the new block must not overlap (the root range is added by setup itself).
    writeFileSync(subuid, 'alice:100000:65536\nbob:300000:65536\n');
    writeFileSync(subgid, 'alice:100000:65536\n');
  });

  after(() => {
    removeDelegation(name);
    rmSync(dir, { recursive: true, force: true });
  });

  it('--dry-run plans every step and changes nothing', () => {
    const before = readFileSync(subuid, 'utf8');
    const report = runSetup(name, { dryRun: true, subuidPath: subuid, subgidPath: subgid, skipTun: true });
    assert.deepEqual(
      report.actions.filter((a) => a.changed).map((a) => a.step),
      ['root-range', 'subuid', 'subgid', 'cgroup'],
    );
    assert.match(report.actions.find((a) => a.step === 'subuid')!.message, /^would add /);
    assert.equal(readFileSync(subuid, 'utf8'), before);
    assert.deepEqual(cgroupDelegation(lookupUser(name)!, cgroupMounts()).controllers, []);
    const cli = spawnSync(process.execPath, [bin, 'setup', name, '--dry-run'], { encoding: 'utf8' });
    assert.equal(cli.status, 0, cli.stderr);
    assert.match(cli.stdout, /^plan +cgroup: would create /m);
    assert.match(cli.stdout, new RegExp(`^dry run: nothing changed for ${name}$`, 'm'));
  });

  it('adds non-overlapping ranges and delegates the cgroup subtree; a second run changes nothing', () => {
    const user = lookupUser(name)!;
    const first = runSetup(name, {
      subuidPath: subuid,
      subgidPath: subgid,
      skipPackages: true,
      skipTun: true,
    });
    assert.deepEqual(
      first.actions.map((a) => [a.step, a.changed]),
      [
        ['root-range', true],
        ['subuid', true],
        ['subgid', true],
        ['cgroup', true],
      ],
    );
    for (const file of [subuid, subgid]) {
      const ranges = parseRanges(readFileSync(file, 'utf8'));
      const mine = ranges.filter((r) => r.name === name);
      assert.equal(mine.length, 1, file);
      assert.equal(mine[0]!.count, 65536);
      for (const other of ranges.filter((r) => r.name !== name)) {
        const overlap = mine[0]!.start < other.start + other.count && other.start < mine[0]!.start + 65536;
        assert.equal(overlap, false, `${name} overlaps ${other.name} in ${file}`);
      }
      assert.ok(
        ranges.some((r) => r.name === 'seed-sandbox'),
        `root range reserved in ${file}`,
      );
    }
    const delegation = cgroupDelegation(user, cgroupMounts());
    assert.deepEqual(delegation.controllers, [...delegatedControllers(delegation.layout)]);
    for (const path of delegation.dirs.values()) assert.equal(statSync(path).uid, user.uid);

    const files = [readFileSync(subuid, 'utf8'), readFileSync(subgid, 'utf8')];
    const second = runSetup(name, {
      subuidPath: subuid,
      subgidPath: subgid,
      skipPackages: true,
      skipTun: true,
    });
    assert.deepEqual(
      second.actions.map((a) => a.changed),
      [false, false, false, false],
    );
    assert.deepEqual([readFileSync(subuid, 'utf8'), readFileSync(subgid, 'utf8')], files);
  });

  it('refuses an unknown account and root with a field error', () => {
    assert.throws(() => runSetup('no-such-user-xyz', { dryRun: true }), {
      code: 'invalid_option',
      field: 'user',
    });
    assert.throws(() => runSetup('root', { dryRun: true }), { code: 'invalid_option', field: 'user' });
  });
});
