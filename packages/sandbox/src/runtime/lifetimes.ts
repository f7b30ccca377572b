/**
 * Box lifetimes: BoxLite's `autoPause` (idle seconds), `autoDelete` (seconds after stop) and
 * `autoResume`, and E2B's box timeout (`timeoutMs` at create, `box.setTimeout(ms)` later) with what happens
 * at expiry (`onTimeout`: `stop`, `pause` or `remove`).
 *
 * Everything is stored in the `box_lifetimes` table of `<homeDir>/state.db`, as absolute times (epoch ms),
 * never as in-process timers only: the reaper (`reaper.ts`), a process of its own, reads the table and acts,
 * so lifetimes hold for detached boxes with no SDK process alive and across a restart of the runtime.
 * A row exists for every box created with a lifetime option or given a timeout; it goes with the box
 * (`ON DELETE CASCADE`).
 */
import { BoxError } from '../errors.ts';
import type { JsLifetimeOptions, TimeoutAction } from '../types.ts';
import type { StateDb } from './state.ts';

/** What happens when a box's timeout passes (E2B's timeout; `onTimeout`). */
export type { TimeoutAction };
/** The lifetime options of `JsBoxOptions`, as given by a caller (seconds or ms as named). */
export type LifetimeOptions = JsLifetimeOptions;

/** Lifetime settings of one box as stored; null for a setting not given. */
export interface BoxLifetimes {
  autoPause: number | null;
  autoDelete: number | null;
  autoResume: boolean;
  onTimeout: TimeoutAction;
}

/** A `box_lifetimes` row: the settings plus the stored times (epoch ms). */
export interface LifetimeRow extends BoxLifetimes {
  boxId: string;
  /** When `onTimeout` happens; null when the box has no timeout (or it already fired). */
  deadline: number | null;
  /** Last command start or end (or start, resume); the idle clock of `autoPause`. */
  lastActive: number;
  /** When the box was seen stopped; the clock of `autoDelete`. */
  stoppedAt: number | null;
}

const SCHEMA = `CREATE TABLE IF NOT EXISTS box_lifetimes (
  box_id TEXT PRIMARY KEY REFERENCES boxes(id) ON DELETE CASCADE,
  auto_pause REAL,
  auto_delete REAL,
  auto_resume INTEGER NOT NULL DEFAULT 0,
  on_timeout TEXT NOT NULL DEFAULT 'stop',
  deadline INTEGER,
  last_active INTEGER NOT NULL,
  stopped_at INTEGER
)`;

/** The lifetime fields of `JsBoxOptions`. */
export const LIFETIME_FIELDS = ['autoPause', 'autoDelete', 'autoResume', 'timeoutMs', 'onTimeout'] as const;

/** Longest accepted timeout, ms (E2B's is 24 h for paid plans; a month here). */
export const MAX_TIMEOUT_MS = 31 * 24 * 3600 * 1000;

function seconds(value: unknown, field: string, allowZero: boolean): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || (!allowZero && value === 0)) {
    throw new BoxError(
      `invalid box option ${field}: must be a number of seconds ${allowZero ? '≥ 0' : '> 0'}`,
      { field },
    );
  }
  return value;
}

/**
 * Checks a timeout in ms (`timeoutMs`, or `setTimeout`'s argument named by `field`).
 * @throws BoxError `invalid_option` naming `field` unless 0 < ms ≤ {@link MAX_TIMEOUT_MS}.
 */
export function checkTimeoutMs(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_TIMEOUT_MS) {
    throw new BoxError(`invalid box option ${field}: must be a number of ms > 0 and ≤ ${MAX_TIMEOUT_MS}`, {
      field,
    });
  }
  return Math.round(value);
}

/**
 * Checks a timeout action.
 * @throws BoxError `invalid_option` naming `field` unless it is `stop`, `pause` or `remove`.
 */
export function checkTimeoutAction(value: unknown, field: string): TimeoutAction {
  if (value !== 'stop' && value !== 'pause' && value !== 'remove') {
    throw new BoxError(`invalid box option ${field}: must be 'stop', 'pause' or 'remove'`, { field });
  }
  return value;
}

/**
 * Validates the lifetime options of a box's options object; null when none is set.
 * @throws BoxError `invalid_option` naming the field: `autoPause` (> 0 s), `autoDelete` (≥ 0 s),
 *   `autoResume` (boolean), `timeoutMs` (see {@link checkTimeoutMs}), `onTimeout` (stop, pause, remove).
 */
export function validateLifetimes(options: unknown): (BoxLifetimes & { timeoutMs: number | null }) | null {
  if (typeof options !== 'object' || options === null) return null;
  const o = options as Record<string, unknown>;
  if (!LIFETIME_FIELDS.some((field) => o[field] !== undefined && o[field] !== null)) return null;
  if (o.autoResume !== undefined && o.autoResume !== null && typeof o.autoResume !== 'boolean') {
    throw new BoxError('invalid box option autoResume: must be a boolean', { field: 'autoResume' });
  }
  const timeoutMs =
    o.timeoutMs === undefined || o.timeoutMs === null ? null : checkTimeoutMs(o.timeoutMs, 'timeoutMs');
  return {
    autoPause: seconds(o.autoPause, 'autoPause', false),
    autoDelete: seconds(o.autoDelete, 'autoDelete', true),
    autoResume: o.autoResume === true,
    onTimeout:
      o.onTimeout === undefined || o.onTimeout === null
        ? 'stop'
        : checkTimeoutAction(o.onTimeout, 'onTimeout'),
    timeoutMs,
  };
}

function toRow(row: Record<string, unknown>): LifetimeRow {
  return {
    boxId: row.box_id as string,
    autoPause: (row.auto_pause as number | null) ?? null,
    autoDelete: (row.auto_delete as number | null) ?? null,
    autoResume: row.auto_resume === 1,
    onTimeout: row.on_timeout as TimeoutAction,
    deadline: (row.deadline as number | null) ?? null,
    lastActive: row.last_active as number,
    stoppedAt: (row.stopped_at as number | null) ?? null,
  };
}

/** The `box_lifetimes` table of one state database. */
export class LifetimeStore {
  readonly #db: StateDb;

  /** Creates the table when missing. */
  constructor(db: StateDb) {
    this.#db = db;
    db.run(SCHEMA);
  }

  /** Stores the settings of a new box; the timeout, when given, counts from `now` (epoch ms). */
  create(boxId: string, lifetimes: BoxLifetimes & { timeoutMs: number | null }, now = Date.now()): void {
    this.#db.run(
      `INSERT OR REPLACE INTO box_lifetimes
       (box_id, auto_pause, auto_delete, auto_resume, on_timeout, deadline, last_active) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      boxId,
      lifetimes.autoPause,
      lifetimes.autoDelete,
      lifetimes.autoResume ? 1 : 0,
      lifetimes.onTimeout,
      lifetimes.timeoutMs === null ? null : now + lifetimes.timeoutMs,
      now,
    );
  }

  /** The row of a box, or null when it has no lifetime settings. */
  get(boxId: string): LifetimeRow | null {
    const row = this.#db.all('SELECT * FROM box_lifetimes WHERE box_id = ?', boxId)[0];
    return row ? toRow(row) : null;
  }

  /** Every row, oldest box first. */
  list(): LifetimeRow[] {
    return this.#db.all('SELECT * FROM box_lifetimes ORDER BY box_id').map(toRow);
  }

  /**
   * Sets (replaces) a box's timeout: `action` happens `ms` after `now` (E2B `setTimeout`); the action
   * stays as it was when not given.
   */
  setTimeout(boxId: string, ms: number, action: TimeoutAction | undefined, now = Date.now()): void {
    const changed = this.#db.change(
      `UPDATE box_lifetimes SET deadline = ?, on_timeout = coalesce(?, on_timeout) WHERE box_id = ?`,
      now + ms,
      action ?? null,
      boxId,
    );
    if (changed === 0) {
      this.create(
        boxId,
        { autoPause: null, autoDelete: null, autoResume: false, onTimeout: action ?? 'stop', timeoutMs: ms },
        now,
      );
    }
  }

  /** Clears a fired timeout. */
  clearDeadline(boxId: string): void {
    this.#db.run('UPDATE box_lifetimes SET deadline = NULL WHERE box_id = ?', boxId);
  }

  /** Restarts the idle clock (a command started or ended, the box started or resumed). */
  touch(boxId: string, now = Date.now()): void {
    this.#db.run('UPDATE box_lifetimes SET last_active = ? WHERE box_id = ?', now, boxId);
  }

  /** Starts the `autoDelete` clock of a stopped box (kept when already running). */
  markStopped(boxId: string, now = Date.now()): void {
    this.#db.run(
      'UPDATE box_lifetimes SET stopped_at = coalesce(stopped_at, ?) WHERE box_id = ?',
      now,
      boxId,
    );
  }

  /** A box started again: no `autoDelete` clock, the idle clock from now. */
  markStarted(boxId: string, now = Date.now()): void {
    this.#db.run('UPDATE box_lifetimes SET stopped_at = NULL, last_active = ? WHERE box_id = ?', now, boxId);
  }

  /**
   * True while some box may still need the reaper: a pending timeout, an `autoPause` box that is up
   * (running or paused: anyone may resume it), or an `autoDelete` box (it may stop at any time, its
   * creating process dying included).
   */
  needsReaper(): boolean {
    const row = this.#db.all(
      `SELECT 1 FROM box_lifetimes l JOIN boxes b ON b.id = l.box_id
       WHERE l.deadline IS NOT NULL OR l.auto_delete IS NOT NULL
          OR (l.auto_pause IS NOT NULL AND b.status = 'running') LIMIT 1`,
    );
    return row.length > 0;
  }
}
