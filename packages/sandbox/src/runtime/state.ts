/**
 * Box and volume records of one `homeDir`, in SQLite (`node:sqlite`, WAL journal) so that every process
 * using the same `homeDir` sees the same boxes. Names are unique by a UNIQUE constraint; a record in
 * status `creating` belongs to the process named by `owner` until that process is gone (crash recovery).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync, type SQLInputValue, type SQLOutputValue } from 'node:sqlite';
import { ownerAlive, processIdentity } from '../engine/proc-stat.ts';
import { BoxError } from '../errors.ts';
import { immediateTransaction, useWalJournal } from '../sqlite-transaction.ts';
import type { JsHealthStatus } from '../types.ts';
import type { NormalizedBoxOptions } from './options.ts';

/**
 * Status of a box record: `creating` (being set up), `running`, `stopped`, `failed`; and `paused`, which is
 * never stored: a running box whose cgroup is frozen is reported `paused` (`engine/freezer.ts`).
 */
export type BoxStatus = 'creating' | 'running' | 'paused' | 'stopped' | 'failed';

/** Stage timings of a box's creation, ms (spec 002 `JsBoxMetrics` names). */
export interface BoxTimings {
  totalCreateDurationMs?: number;
  stageImagePrepareMs?: number;
  stageFilesystemSetupMs?: number;
  stageBoxConfigMs?: number;
  stageBoxSpawnMs?: number;
  stageContainerInitMs?: number;
}

/** Box options as persisted: secret values are never written to disk. */
export type StoredBoxOptions = Omit<NormalizedBoxOptions, 'secrets'> & {
  secrets: { name: string; hosts: string[]; placeholder: string }[];
};

/** One box record. Times are ISO 8601 / RFC 3339 UTC strings. */
export interface BoxRecord {
  id: string;
  name: string | null;
  status: BoxStatus;
  pid: number | null;
  /** `pid:starttime` of the box's init process while running (detects a dead box without the engine). */
  init: string | null;
  createdAt: string;
  startedAt: string | null;
  /** Image reference or rootfs path. */
  image: string;
  options: StoredBoxOptions;
  /** `pid:starttime` of the process that created the box (identifies it across pid reuse). */
  owner: string;
  timings: BoxTimings;
  commandsExecuted: number;
  execErrors: number;
  bytesSent: number;
  bytesReceived: number;
  /** Last recorded health of a box with a `healthCheck` since its latest start; null before the first check. */
  health: StoredHealth | null;
}

/** A box's health as stored: the public status and `monitor`, the `pid:starttime` of the process checking it. */
export type StoredHealth = JsHealthStatus & { monitor?: string };

/** A managed volume: data lives in `<homeDir>/volumes/<id>/data`. */
export interface VolumeRecord {
  id: string;
  name: string | null;
  createdAt: string;
}

interface BoxRow {
  id: string;
  name: string | null;
  status: string;
  pid: number | null;
  init: string | null;
  created_at: string;
  started_at: string | null;
  image: string;
  options: string;
  owner: string;
  timings: string;
  commands_executed: number;
  exec_errors: number;
  bytes_sent: number;
  bytes_received: number;
  health: string | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS boxes (
  id TEXT PRIMARY KEY,
  name TEXT UNIQUE,
  status TEXT NOT NULL,
  pid INTEGER,
  init TEXT,
  created_at TEXT NOT NULL,
  started_at TEXT,
  image TEXT NOT NULL,
  options TEXT NOT NULL,
  owner TEXT NOT NULL,
  timings TEXT NOT NULL DEFAULT '{}',
  commands_executed INTEGER NOT NULL DEFAULT 0,
  exec_errors INTEGER NOT NULL DEFAULT 0,
  bytes_sent INTEGER NOT NULL DEFAULT 0,
  bytes_received INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS volumes (
  id TEXT PRIMARY KEY,
  name TEXT UNIQUE,
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS box_volumes (
  box_id TEXT NOT NULL REFERENCES boxes(id) ON DELETE CASCADE,
  volume_id TEXT NOT NULL REFERENCES volumes(id),
  PRIMARY KEY (box_id, volume_id)
);
`;

function toRecord(row: BoxRow): BoxRecord {
  return {
    id: row.id,
    name: row.name,
    status: row.status as BoxStatus,
    pid: row.pid,
    init: row.init,
    createdAt: row.created_at,
    startedAt: row.started_at,
    image: row.image,
    options: JSON.parse(row.options) as StoredBoxOptions,
    owner: row.owner,
    timings: JSON.parse(row.timings) as BoxTimings,
    commandsExecuted: row.commands_executed,
    execErrors: row.exec_errors,
    bytesSent: row.bytes_sent,
    bytesReceived: row.bytes_received,
    health: row.health ? (JSON.parse(row.health) as StoredHealth) : null,
  };
}

export { ownerAlive, processIdentity };

/** SQLite's extended result code of a UNIQUE constraint violation (`SQLITE_CONSTRAINT_UNIQUE`). */
const SQLITE_CONSTRAINT_UNIQUE = 2067;

/** True when `error` is node:sqlite's error for a UNIQUE constraint violation (by its `errcode`). */
export function isUniqueViolation(error: unknown): boolean {
  return (error as { errcode?: unknown } | null)?.errcode === SQLITE_CONSTRAINT_UNIQUE;
}

/**
 * Runs `write`, which gives a box the name `name`; a UNIQUE violation (another box has that name)
 * becomes the caller's error.
 * @throws BoxError `conflict` (field `name`) when the name is taken; what `write` throws otherwise.
 */
export function withBoxName<T>(name: string | null, write: () => T): T {
  try {
    return write();
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new BoxError(`invalid box option name: a box named '${name}' already exists`, {
        field: 'name',
        code: 'conflict',
      });
    }
    throw error;
  }
}

/** Increments of a box's exec counters: commands started, exec errors, bytes to stdin, bytes of output. */
export interface CounterDelta {
  commands?: number;
  errors?: number;
  sent?: number;
  received?: number;
}

/** How long an operation on the state database waits for another process's lock, ms. */
const STATE_BUSY_TIMEOUT_MS = 10_000;

/** The state database of one `homeDir` (`<homeDir>/state.db`). */
export class StateDb {
  readonly #db: DatabaseSync;

  /** Opens (creating when missing) `<homeDir>/state.db` in WAL mode. */
  constructor(homeDir: string) {
    mkdirSync(homeDir, { recursive: true, mode: 0o700 });
    this.#db = new DatabaseSync(join(homeDir, 'state.db'), { timeout: STATE_BUSY_TIMEOUT_MS });
    useWalJournal(this.#db, STATE_BUSY_TIMEOUT_MS);
    this.#db.exec('PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;');
    this.#db.exec(SCHEMA);
    const columns = this.#db.prepare('PRAGMA table_info(boxes)').all() as { name: string }[];
    if (!columns.some((c) => c.name === 'health')) {
      try {
        this.#db.exec('ALTER TABLE boxes ADD COLUMN health TEXT');
      } catch (error) {
        // Another process may have added it in between: only then is the failure fine.
        const now = this.#db.prepare('PRAGMA table_info(boxes)').all() as { name: string }[];
        if (!now.some((c) => c.name === 'health')) throw error;
      }
    }
  }

  /**
   * Inserts a box in status `creating`, owned by this process.
   * @throws BoxError (field `name`) when the name is taken.
   */
  insertBox(box: {
    id: string;
    name: string | null;
    image: string;
    options: StoredBoxOptions;
    createdAt: string;
  }): void {
    const owner = processIdentity(process.pid) ?? `${process.pid}:0`;
    withBoxName(box.name, () =>
      this.#db
        .prepare(
          'INSERT INTO boxes (id, name, status, created_at, image, options, owner) VALUES (?, ?, ?, ?, ?, ?, ?)',
        )
        .run(box.id, box.name, 'creating', box.createdAt, box.image, JSON.stringify(box.options), owner),
    );
  }

  /** The box with this id, else the box with this name, else null. */
  getBox(idOrName: string): BoxRecord | null {
    const row = this.#db
      .prepare('SELECT * FROM boxes WHERE id = ? UNION ALL SELECT * FROM boxes WHERE name = ? LIMIT 1')
      .get(idOrName, idOrName) as BoxRow | undefined;
    return row ? toRecord(row) : null;
  }

  /** All boxes, oldest first. */
  listBoxes(): BoxRecord[] {
    return (this.#db.prepare('SELECT * FROM boxes ORDER BY id').all() as unknown as BoxRow[]).map(toRecord);
  }

  /** Number of boxes in status `running`. */
  countRunning(): number {
    const row = this.#db.prepare("SELECT count(*) AS n FROM boxes WHERE status = 'running'").get() as {
      n: number;
    };
    return row.n;
  }

  /** Marks a box running with its init pid, start time and (on first start) creation timings; health restarts. */
  markRunning(id: string, pid: number, init: string | null, startedAt: string, timings: BoxTimings): void {
    this.#db
      .prepare(
        "UPDATE boxes SET status = 'running', pid = ?, init = ?, started_at = ?, timings = ?, health = NULL WHERE id = ?",
      )
      .run(pid, init, startedAt, JSON.stringify(timings), id);
  }

  /** Sets the status of a box (`stopped`, `failed`) and clears its pid. */
  setStatus(id: string, status: BoxStatus): void {
    this.#db.prepare('UPDATE boxes SET status = ?, pid = NULL, init = NULL WHERE id = ?').run(status, id);
  }

  /** Records the health of a box (its latest check); only while the box is running. */
  setHealth(id: string, health: StoredHealth): void {
    this.#db
      .prepare("UPDATE boxes SET health = ? WHERE id = ? AND status = 'running'")
      .run(JSON.stringify(health), id);
  }

  /**
   * Records `health` only while the stored value is still `expected` (its JSON text, or null): how a
   * process takes over the checks of a running box whose monitor is gone. True when this call won.
   */
  claimHealth(id: string, expected: string | null, health: StoredHealth): boolean {
    const result = this.#db
      .prepare("UPDATE boxes SET health = ? WHERE id = ? AND status = 'running' AND health IS ?")
      .run(JSON.stringify(health), id, expected);
    return Number(result.changes) === 1;
  }

  /** Adds to a box's counters (commands, exec errors, bytes to stdin, bytes from stdout/stderr). */
  addCounters(id: string, delta: CounterDelta): void {
    this.#db
      .prepare(
        `UPDATE boxes SET commands_executed = commands_executed + ?, exec_errors = exec_errors + ?,
         bytes_sent = bytes_sent + ?, bytes_received = bytes_received + ? WHERE id = ?`,
      )
      .run(delta.commands ?? 0, delta.errors ?? 0, delta.sent ?? 0, delta.received ?? 0, id);
  }

  /** Deletes a box record (and its volume links). */
  deleteBox(id: string): void {
    this.#db.prepare('DELETE FROM boxes WHERE id = ?').run(id);
  }

  /** Links a box to the managed volumes it mounts. */
  linkVolumes(boxId: string, volumeIds: string[]): void {
    const stmt = this.#db.prepare('INSERT OR IGNORE INTO box_volumes (box_id, volume_id) VALUES (?, ?)');
    for (const volumeId of volumeIds) stmt.run(boxId, volumeId);
  }

  /** The managed volume with this id, else with this name, else null. */
  getVolume(idOrName: string): VolumeRecord | null {
    const row = this.#db
      .prepare(
        'SELECT id, name, created_at AS createdAt FROM volumes WHERE id = ? UNION ALL SELECT id, name, created_at FROM volumes WHERE name = ? LIMIT 1',
      )
      .get(idOrName, idOrName) as unknown as VolumeRecord | undefined;
    return row ? { ...row } : null;
  }

  /** All managed volumes, oldest first. */
  listVolumes(): VolumeRecord[] {
    return (
      this.#db
        .prepare('SELECT id, name, created_at AS createdAt FROM volumes ORDER BY id')
        .all() as unknown as VolumeRecord[]
    ).map((row) => ({ ...row }));
  }

  /**
   * Inserts a managed volume; returns the existing one when `name` is already taken (a concurrent create).
   */
  insertVolume(volume: VolumeRecord): VolumeRecord {
    try {
      this.#db
        .prepare('INSERT INTO volumes (id, name, created_at) VALUES (?, ?, ?)')
        .run(volume.id, volume.name, volume.createdAt);
      return volume;
    } catch (error) {
      if (isUniqueViolation(error) && volume.name !== null) return this.getVolume(volume.name)!;
      throw error;
    }
  }

  /** Ids of the boxes that mount a volume. */
  volumeUsers(volumeId: string): string[] {
    return (
      this.#db.prepare('SELECT box_id FROM box_volumes WHERE volume_id = ?').all(volumeId) as {
        box_id: string;
      }[]
    ).map((row) => row.box_id);
  }

  /** Deletes a managed volume record. */
  deleteVolume(id: string): void {
    this.#db.prepare('DELETE FROM volumes WHERE id = ?').run(id);
  }

  /** Runs `fn` in one IMMEDIATE transaction (serialised against other processes). */
  transaction<T>(fn: () => T): T {
    return immediateTransaction(this.#db, fn);
  }

  /** Runs a statement (used by tests and recovery). */
  run(sql: string, ...params: SQLInputValue[]): void {
    this.#db.prepare(sql).run(...params);
  }

  /** Rows of a query (used by the lifetimes and pool tables, `lifetimes.ts` and `pool.ts`). */
  all(sql: string, ...params: SQLInputValue[]): Record<string, SQLOutputValue>[] {
    return this.#db.prepare(sql).all(...params);
  }

  /** Runs a statement; the number of rows it changed. */
  change(sql: string, ...params: SQLInputValue[]): number {
    return Number(this.#db.prepare(sql).run(...params).changes);
  }

  /** Closes the database handle. */
  close(): void {
    if (this.#db.isOpen) this.#db.close();
  }
}
