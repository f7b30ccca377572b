/**
 * `node:sqlite` helpers shared by the image store's layer budget (`images/store-budget.ts`) and the
 * runtime's box state (`runtime/state.ts`): the WAL journal set when a database is opened, and one
 * write transaction.
 */
import type { DatabaseSync } from 'node:sqlite';

/** SQLite's `SQLITE_BUSY` result code. */
const SQLITE_BUSY = 5;
/** Pause between two tries of the journal mode change, ms. */
const WAL_RETRY_MS = 10;

/**
 * Puts `db` in WAL journal mode (`PRAGMA journal_mode = WAL`; the mode is kept in the file). SQLite
 * changes the journal mode under an exclusive lock without calling the busy handler: while another
 * process holds a lock on a database still in rollback mode (another process creating the same new
 * database and switching it to WAL, or writing to it), the change fails at once with
 * `database is locked`. It is tried again every {@link WAL_RETRY_MS} ms (blocking, as SQLite's own busy
 * handler does) for up to `timeoutMs`.
 * @throws SQLite's error when it is not `SQLITE_BUSY`, or the busy error past `timeoutMs`.
 */
export function useWalJournal(db: DatabaseSync, timeoutMs: number): void {
  const deadline = Date.now() + timeoutMs;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      db.exec('PRAGMA journal_mode = WAL');
      return;
    } catch (error) {
      if ((error as { errcode?: number }).errcode !== SQLITE_BUSY || Date.now() >= deadline) throw error;
      Atomics.wait(pause, 0, 0, WAL_RETRY_MS);
    }
  }
}

/**
 * Runs `fn` in one `BEGIN IMMEDIATE` transaction on `db` (it takes SQLite's write lock first, so the
 * transaction is serialised against other processes) and commits; rolls back when `fn` throws.
 * @returns what `fn` returns. @throws what `fn` throws, or SQLite's busy error past the database's timeout.
 */
export function immediateTransaction<T>(db: DatabaseSync, fn: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = fn();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}
