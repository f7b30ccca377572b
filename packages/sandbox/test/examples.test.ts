/**
 * The examples run as a user would run them (`node examples/<name>.ts`), against the local registry and a
 * temporary `SANDBOX_HOME`; each step's printed outcome is checked, and nothing is left in the home.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { boxDirs, cleanupAll, ensureRegistry, tempHome } from './runtime-helpers.ts';

const packageDir = join(import.meta.dirname, '..');

describe('examples', () => {
  after(async () => {
    await cleanupAll();
  });

  it('agent-turns: files kept across turns, paused between them, resumed by a command, restored from a snapshot, exported and imported elsewhere, removed at the end', () => {
    ensureRegistry();
    const home = tempHome('sandbox-example-');
    const result = spawnSync(process.execPath, [join(packageDir, 'examples', 'agent-turns.ts')], {
      cwd: packageDir,
      env: { ...process.env, SANDBOX_HOME: home, SANDBOX_EXAMPLE_REGISTRY: '127.0.0.1:5000' },
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(result.status, 0, result.stderr);
    const lines = result.stdout.split('\n').filter((line) => line.startsWith('agent-turns: '));
    const expected = [
      /^agent-turns: created box [0-9A-Z]{26}$/,
      /^agent-turns: turn 1 output: line 1, line 2, line 3$/,
      /^agent-turns: paused: status paused, heartbeat frozen true$/,
      /^agent-turns: turn 2: status running, files count.sh heartbeat$/,
      /^agent-turns: worker running again true$/,
      /^agent-turns: snapshot turn-2 taken, box running$/,
      /^agent-turns: turn 3: broke the program, count.sh exists false$/,
      /^agent-turns: restored turn-2: count.sh exists true, output line 1, line 2, line 3$/,
      /^agent-turns: timeout extended to 30 minutes$/,
      /^agent-turns: explicit pause and resume: status running$/,
      /^agent-turns: exported to an OCI archive of \d+\.\d MB$/,
      /^agent-turns: imported elsewhere: files count.sh heartbeat, output line 1, line 2, line 3$/,
      /^agent-turns: removed$/,
    ];
    assert.equal(lines.length, expected.length, result.stdout);
    for (const [i, re] of expected.entries()) assert.match(lines[i]!, re);
    assert.deepEqual(boxDirs(home), []);
  });
});
