/**
 * One write transaction on a `node:sqlite` database, shared by the image store's layer budget
 * (`images/store-budget.ts`) and the runtime's box state (`runtime/state.ts`).
 */
import type { DatabaseSync } from 'node:sqlite';

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
