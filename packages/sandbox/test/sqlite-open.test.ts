/**
 * Opening the runtime's SQLite databases while another process holds a new database locked (the box
 * state `<homeDir>/state.db`, the image store's `<homeDir>/images/budget.db`): SQLite changes the
 * journal mode to WAL without calling its busy handler, so a second process creating the same new
 * database was refused at once with `database is locked` (two processes pulling into one fresh home).
 * Real processes, real database files.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, test } from 'node:test';
// internal: the state database is opened directly, as a runtime of the home does
import { StateDb } from '../src/runtime/state.ts';

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * Another process that creates database `file` in rollback mode and holds its write lock for `holdMs`
 * ms; resolves once the lock is held, with a promise of that process's exit.
 */
async function holdLocked(file: string, holdMs: number): Promise<{ exited: Promise<number | null> }> {
  const script = `
    const { DatabaseSync } = require('node:sqlite');
    const db = new DatabaseSync(process.argv[1]);
    db.exec('CREATE TABLE IF NOT EXISTS held (a INTEGER); BEGIN IMMEDIATE; INSERT INTO held VALUES (1)');
    console.log('locked');
    setTimeout(() => { db.exec('COMMIT'); db.close(); }, ${holdMs});`;
  const child = spawn(process.execPath, ['-e', script, file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('locked')) resolve();
    });
    child.on('exit', () => reject(new Error('the locking process exited before it held the lock')));
  });
  return { exited };
}

test('a new database another process holds locked is refused at once by a plain WAL switch', async () => {
  // The SQLite behaviour the runtime works around: no busy wait for the journal mode change.
  const dir = mkdtempSync(join(tmpdir(), 'sqlite-open-'));
  dirs.push(dir);
  const file = join(dir, 'plain.db');
  const holder = await holdLocked(file, 1_000);
  const db = new DatabaseSync(file, { timeout: 10_000 });
  assert.throws(() => db.exec('PRAGMA journal_mode = WAL'), /database is locked/);
  db.close();
  assert.equal(await holder.exited, 0);
});

test('the box state database opens in WAL mode once another process lets go of its lock', async () => {
  const home = mkdtempSync(join(tmpdir(), 'sqlite-open-'));
  dirs.push(home);
  mkdirSync(home, { recursive: true });
  const holder = await holdLocked(join(home, 'state.db'), 300);
  // Waits for the lock instead of failing with `database is locked`.
  const state = new StateDb(home);
  assert.equal(await holder.exited, 0);
  const check = new DatabaseSync(join(home, 'state.db'));
  const mode = check.prepare('PRAGMA journal_mode').get() as { journal_mode: string };
  assert.equal(mode.journal_mode, 'wal');
  // The other process's row is there: its transaction committed before the switch.
  assert.deepEqual(
    check
      .prepare('SELECT a FROM held')
      .all()
      .map((row) => row.a),
    [1],
  );
  check.close();
  assert.ok(state);
});
