/** The one `/proc/<pid>/stat` reader (`src/engine/proc-stat.ts`). */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
// internal: the process-table reader is tested as a unit
import { parseProcStat, processRuns, readProcStat } from '../src/engine/proc-stat.ts';

test('parses fields after the last parenthesis, whatever the command name holds', () => {
  const tail = [
    'S',
    '1',
    '7',
    '7',
    '0',
    '-1',
    '4194560',
    '9',
    '0',
    '0',
    '0',
    '12',
    '34',
    '0',
    '0',
    '20',
    '0',
    '1',
    '0',
    '5678',
    '0',
  ];
  const stat = parseProcStat(`42 (a) b (c) d) ${tail.join(' ')}\n`);
  assert.deepEqual(stat, {
    pid: 42,
    comm: 'a) b (c) d',
    state: 'S',
    ppid: 1,
    utime: 12,
    stime: 34,
    starttime: 5678,
  });
  assert.equal(parseProcStat('not a stat line'), null);
  assert.equal(parseProcStat('1 (x) S 0'), null);
});

test('reads this process and its child; a process that exited is not running', async () => {
  const self = readProcStat(process.pid);
  assert.equal(self?.pid, process.pid);
  assert.equal(self?.ppid, process.ppid);
  assert.ok(self && self.starttime > 0);
  const child = spawn('sleep', ['30']);
  const pid = child.pid!;
  assert.equal(readProcStat(pid)?.ppid, process.pid);
  assert.equal(processRuns(pid), true);
  child.kill('SIGKILL');
  await once(child, 'exit');
  assert.equal(processRuns(pid), false);
  assert.equal(readProcStat(2 ** 22 + 1), null);
});
