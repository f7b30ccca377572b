/**
 * The audit log of the shared service: one JSON line per authenticated API request (and per request
 * refused for a missing or invalid credential, under tenant `-`) — when, who (tenant, subject, managed
 * key id), what (method and route template, the box / volume / pool / execution it named), and the
 * outcome (status and error code). Nothing secret: no credential, no body, no query string (preview
 * tokens are never written; a preview request is logged by its preview id). Lines go to `audit.jsonl`
 * in the server's state directory; past
 * {@link AUDIT_ROTATE_BYTES} the file becomes `audit.jsonl.1` (the previous one dropped). Queries read
 * both files line by line, filtered by tenant and time, newest last, at most `limit` entries.
 */
import { createReadStream, mkdirSync, renameSync, statSync } from 'node:fs';
import { appendFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';

/** Size at which the log is rotated, bytes (64 MiB). */
export const AUDIT_ROTATE_BYTES = 64 * 1024 * 1024;
/** Most entries one query answers. */
export const AUDIT_MAX_LIMIT = 1000;

/** One audit entry (snake_case as written). */
export interface AuditEntry {
  /** RFC 3339. */
  time: string;
  tenant: string;
  subject: string;
  key_id?: string;
  method: string;
  /** The route template, e.g. `/v1/boxes/:box/files/content`. */
  route: string;
  /** The resources the request named (`box`, `execution`, `volume`, `pool`, `preview`, `key`). */
  resource?: Record<string, string>;
  status: number;
  /** The error code of a failed request. */
  error?: string;
}

/** A query of the audit log. */
export interface AuditQuery {
  tenant?: string;
  /** Entries at or after this time, ms since the epoch. */
  since?: number;
  /** Entries before this time, ms since the epoch. */
  until?: number;
  /** At most this many (the newest); default and maximum {@link AUDIT_MAX_LIMIT}. */
  limit?: number;
}

/** The audit log of one server (see the module comment). */
export class AuditLog {
  /** Path of the current file. */
  readonly path: string;
  #chain: Promise<void> = Promise.resolve();
  #size = -1;

  /** @param path the log file (created 0600 with its directory on the first entry). */
  constructor(path: string) {
    this.path = path;
  }

  /** Appends `entry` (writes are serialized; a failed write is dropped, never thrown at a request). */
  write(entry: AuditEntry): void {
    const line = `${JSON.stringify(entry)}\n`;
    this.#chain = this.#chain.then(async () => {
      try {
        if (this.#size < 0) {
          mkdirSync(dirname(this.path), { recursive: true, mode: 0o700 });
          try {
            this.#size = statSync(this.path).size;
          } catch {
            this.#size = 0;
          }
        }
        if (this.#size + line.length > AUDIT_ROTATE_BYTES) {
          renameSync(this.path, `${this.path}.1`);
          this.#size = 0;
        }
        await appendFile(this.path, line, { mode: 0o600 });
        this.#size += Buffer.byteLength(line);
      } catch {
        // The request has been answered; an unwritable log must not fail later requests.
      }
    });
  }

  /** Resolves once every entry written so far is on disk. */
  flush(): Promise<void> {
    return this.#chain;
  }

  /** Entries matching `query`, oldest first (the newest `limit` of them). */
  async query(query: AuditQuery): Promise<AuditEntry[]> {
    await this.flush();
    const limit = Math.min(query.limit ?? AUDIT_MAX_LIMIT, AUDIT_MAX_LIMIT);
    const found: AuditEntry[] = [];
    for (const path of [`${this.path}.1`, this.path]) {
      let stream: ReturnType<typeof createReadStream>;
      try {
        statSync(path);
        stream = createReadStream(path, { encoding: 'utf8' });
      } catch {
        continue;
      }
      for await (const line of createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })) {
        if (!line) continue;
        let entry: AuditEntry;
        try {
          entry = JSON.parse(line) as AuditEntry;
        } catch {
          continue;
        }
        if (query.tenant !== undefined && entry.tenant !== query.tenant) continue;
        const at = Date.parse(entry.time);
        if (query.since !== undefined && at < query.since) continue;
        if (query.until !== undefined && at >= query.until) continue;
        found.push(entry);
        if (found.length > limit) found.shift();
      }
    }
    return found;
  }
}
