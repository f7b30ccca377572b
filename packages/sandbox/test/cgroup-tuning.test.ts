/**
 * cgroup-tuning.ts: which host mount gets `favordynmods`, from `/proc/self/mountinfo` text, and that the
 * host of this run has it once `ensureFavorDynmods` ran (root, cgroup v1 or hybrid host).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
// internal: the engine's cgroup tuning is tested as a unit
import { cgroupMounts, ensureFavorDynmods } from '../src/engine/cgroup-tuning.ts';

const HYBRID = `32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,favordynmods
50 1 0:40 / /tmp rw - tmpfs tmpfs rw`;
const V2 = '30 1 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate';

describe('favordynmods', () => {
  test('cgroupMounts lists cgroup and cgroup2 mounts with their super options', () => {
    assert.deepEqual(cgroupMounts(HYBRID), [
      { mountPoint: '/sys/fs/cgroup/cpu', type: 'cgroup', superOptions: ['rw', 'cpu'] },
      { mountPoint: '/sys/fs/cgroup/unified', type: 'cgroup2', superOptions: ['rw', 'favordynmods'] },
    ]);
  });

  test('a pure cgroup v2 host needs nothing; a mount that has it is left alone', () => {
    assert.deepEqual(ensureFavorDynmods(V2), { outcome: 'not-needed' });
    assert.deepEqual(ensureFavorDynmods(HYBRID), {
      outcome: 'already',
      mountPoint: '/sys/fs/cgroup/unified',
    });
  });

  test('on this host (root) a cgroup mount has favordynmods afterwards', (t) => {
    if (process.getuid?.() !== 0) return t.skip('needs root');
    const result = ensureFavorDynmods();
    if (result.outcome === 'not-needed') return t.skip('pure cgroup v2 host');
    assert.ok(result.outcome === 'set' || result.outcome === 'already', JSON.stringify(result));
    const mounts = cgroupMounts(readFileSync('/proc/self/mountinfo', 'utf8'));
    assert.ok(mounts.some((m) => m.superOptions.includes('favordynmods')));
  });
});
