/**
 * Escape suite, process limits and lifecycle: every process of a box (init and commands) has the
 * box's own rlimits and `no_new_privs`, never those of the process that created it; a box stopped or
 * removed by another process leaves no supervisor behind; a zombie is never counted as a live box.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
// internal: boxes are made with the engine directly
import { createEngine } from '../../src/engine/index.ts';
// internal: the box rlimits are checked
import { BOX_RLIMITS } from '../../src/engine/oci.ts';
// internal: process identity and owner checks are tested as units
import { ownerAlive, processIdentity } from '../../src/runtime/state.ts';
import { engineTestBed, execSh, supervisorPid } from '../helpers/engine.ts';
import { assertHostUntouched, snapshotHost } from './helpers.ts';

const bed = engineTestBed('escape-proc-', 'escp');
const { tmp, spec } = bed;

/** `Max open files` etc. of /proc/<pid>/limits as `soft/hard`. */
function limits(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^(Max open files|Max core file size|Max locked memory)\s+(\S+)\s+(\S+)/.exec(line);
    if (m) out[m[1]!] = `${m[2]}/${m[3]}`;
  }
  return out;
}

/** The state letter of a process (`R`, `S`, `Z`, …), undefined when it is gone. */
function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

/** Polls `cond` every 20 ms for up to `ms` (a wait for an asynchronous exit, not a timing assertion). */
async function eventually(cond: () => boolean, ms = 20_000): Promise<boolean> {
  for (let t = 0; t < ms && !cond(); t += 20) await sleep(20);
  return cond();
}

describe('limits of box processes', () => {
  test('init and commands have the box rlimits and no_new_privs, not the caller’s; fds run out in the box only', async () => {
    const s = spec();
    const { pid } = await bed.engine.start(s);
    try {
      const want = {
        'Max open files': '1024/4096',
        'Max core file size': '0/0',
        'Max locked memory': `${8 * 1024 * 1024}/${8 * 1024 * 1024}`,
      };
      assert.equal(BOX_RLIMITS.length, 3);
      assert.deepEqual(limits(readFileSync(`/proc/${pid}/limits`, 'utf8')), want, 'init');
      const r = await execSh(bed.engine, s.id, 'cat /proc/self/limits; grep NoNewPrivs /proc/self/status');
      assert.deepEqual(limits(r.stdout), want, 'exec');
      assert.match(r.stdout, /NoNewPrivs:\s+1/);
      const u = await execSh(bed.engine, s.id, 'grep -E "NoNewPrivs|CapEff" /proc/self/status', {
        user: '65534',
      });
      assert.match(u.stdout, /CapEff:\s+0+\n/, 'a non-root command has no effective capabilities');
      assert.match(u.stdout, /NoNewPrivs:\s+1/);
      // Raising the hard limit fails; opening descriptors stops at it.
      const raise = await execSh(bed.engine, s.id, 'ulimit -n 100000');
      assert.notEqual(raise.code, 0);
      const before = Number(readFileSync('/proc/sys/fs/file-nr', 'utf8').split('\t')[0]);
      const fill = await execSh(
        bed.engine,
        s.id,
        'ulimit -n 4096; (i=3; while [ $i -lt 5000 ]; do eval "exec $i</dev/null" 2>/dev/null || exit; echo $i; i=$((i+1)); done) | tail -n 1',
      );
      assert.equal(fill.code, 0, fill.stderr);
      assert.ok(Number(fill.stdout) <= 4096, `opened up to fd ${fill.stdout.trim()}`);
      const after = Number(readFileSync('/proc/sys/fs/file-nr', 'utf8').split('\t')[0]);
      assert.ok(after - before < 20_000, 'the host file table did not fill');
    } finally {
      await bed.engine.remove(s.id, s.boxDir);
    }
  });
});

describe('lifecycle across processes', () => {
  test('a box removed by another process leaves no supervisor behind', async () => {
    const snap = snapshotHost();
    const s = spec({ detach: false });
    await bed.engine.start(s);
    const supervisor = await supervisorPid(s.boxDir);
    assert.ok(supervisor > 0, 'the watch wrote its pid');
    assert.ok(processIdentity(supervisor), 'the supervisor runs');
    // Another engine instance stands for another process: it does not hold this one's pipe.
    const other = await createEngine({ stateRoot: join(tmp, 'state') });
    await other.remove(s.id, s.boxDir);
    assert.ok(await eventually(() => processIdentity(supervisor) === null), 'the supervisor exited');
    assert.equal(existsSync(join(s.boxDir, 'bundle')), false, 'the box is gone');
    assertHostUntouched(snap, { allowMountsUnder: [tmp] });
  });

  test('a zombie is not a live process: processIdentity/ownerAlive say gone, the engine says stopped', async () => {
    // `sleep 0 &` exits while its parent execs into `sleep 30`, which never reaps it.
    const parent = spawn('/bin/sh', ['-c', 'sleep 0 & exec sleep 30'], { stdio: 'ignore' });
    try {
      let zombie = 0;
      assert.ok(
        await eventually(() => {
          for (const name of readFileSync(`/proc/${parent.pid}/task/${parent.pid}/children`, 'utf8').split(
            ' ',
          )) {
            const pid = Number(name);
            if (pid > 0 && procState(pid) === 'Z') zombie = pid;
          }
          return zombie > 0;
        }),
      );
      assert.equal(processIdentity(zombie), null);
      assert.equal(ownerAlive(`${zombie}:1`), false);
    } finally {
      parent.kill('SIGKILL');
    }
    // A box whose init was SIGKILLed is stopped for the engine even before its zombie is reaped.
    const s = spec();
    const { pid } = await bed.engine.start(s);
    process.kill(pid, 'SIGKILL');
    assert.ok(await eventually(() => !['S', 'R', 'D'].includes(procState(pid) ?? 'gone')));
    assert.equal((await bed.engine.state(s.id)).status === 'running', false);
    await assert.rejects(bed.engine.exec(s.id, { cmd: 'true', args: [], env: [] }), /not running/);
    await bed.engine.remove(s.id, s.boxDir);
  });
});
