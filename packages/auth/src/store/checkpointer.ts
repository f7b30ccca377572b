/**
 * Worker thread of {@link SqliteAuthStore}'s background WAL checkpoints (SQLite "Write-Ahead Logging" §
 * "Checkpointing"; `PRAGMA wal_checkpoint(PASSIVE)`).
 *
 * A checkpoint copies committed WAL frames into the database file and fsyncs it. Run by the committing
 * connection (SQLite's automatic checkpoint) it blocks Node's event loop for the copy and the fsync —
 * milliseconds to tens of milliseconds under token traffic. This worker runs it on its own connection
 * instead: PASSIVE checkpoints never block the writer, and the main connection restarts the WAL from the
 * beginning once a checkpoint has caught up. Durability is unchanged (commits are in the WAL either way).
 *
 * `workerData`: `{ path: string, intervalMs: number }`. Messages: `'stop'` closes the connection and
 * exits.
 */
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

const { path, intervalMs } = workerData as { path: string; intervalMs: number };
const db = new DatabaseSync(path, { timeout: 5000 });
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const timer = setInterval(() => {
  try {
    checkpoint.get();
  } catch {
    // Busy or locked: the next tick retries; the main connection's automatic checkpoint is the backstop.
  }
}, intervalMs);
parentPort?.on('message', (message) => {
  if (message !== 'stop') return;
  clearInterval(timer);
  try {
    checkpoint.get();
  } catch {
    // Closing anyway.
  }
  db.close();
  parentPort?.close();
});
