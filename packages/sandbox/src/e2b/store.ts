/**
 * The E2B records of one server on disk: `e2b-sandboxes.json` in the server's state directory (beside
 * `owners.json`), written atomically after every change (`tenancy/state-file.ts`: temporary file, fsync,
 * rename; mode 0600, as it holds envd access tokens) and read when the server starts, so that a sandbox
 * keeps its template, metadata, env vars, access token, timeout and lifecycle across a `sandbox serve`
 * restart. A malformed record in the file is skipped (its box stays a box, adopted afresh on use).
 */
import { readJson, writeJsonAtomic } from '../rest/tenancy/state-file.ts';
import type { E2bSandbox } from './sandboxes.ts';

/** File name of the records in the state directory. */
export const E2B_STATE_FILE = 'e2b-sandboxes.json';

interface StoreFile {
  version: 1;
  sandboxes: Record<string, E2bSandbox>;
}

const isStringMap = (value: unknown): value is Record<string, string> =>
  typeof value === 'object' &&
  value !== null &&
  !Array.isArray(value) &&
  Object.values(value).every((v) => typeof v === 'string');

/** Whether `value` has every field of an `E2bSandbox` with its type. */
function isRecord(value: unknown): value is E2bSandbox {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as Record<string, unknown>;
  return (
    ['sandboxId', 'boxId', 'templateId', 'tenant', 'accessToken'].every((k) => typeof r[k] === 'string') &&
    isStringMap(r.metadata) &&
    isStringMap(r.envVars) &&
    typeof r.endAt === 'number' &&
    ['autoPause', 'autoResume', 'allowInternetAccess'].every((k) => typeof r[k] === 'boolean')
  );
}

/** The persisted records (see the module comment). */
export class E2bStore {
  /** Path of the state file. */
  readonly path: string;

  /** @param path the state file (its directory is created 0700 on first write). */
  constructor(path: string) {
    this.path = path;
  }

  /**
   * The records in the file, by sandbox id (none when it does not exist).
   * @throws Error naming the file when it is not JSON.
   */
  load(): Map<string, E2bSandbox> {
    const file = readJson<Partial<StoreFile>>(this.path, {});
    const out = new Map<string, E2bSandbox>();
    for (const [id, record] of Object.entries(file.sandboxes ?? {})) {
      if (isRecord(record) && record.sandboxId === id) out.set(id, { ...record });
    }
    return out;
  }

  /** Replaces the file's content with `records`. @throws the `fs` error when it cannot be written. */
  save(records: Iterable<E2bSandbox>): void {
    const sandboxes: Record<string, E2bSandbox> = {};
    for (const record of records) sandboxes[record.sandboxId] = record;
    writeJsonAtomic(this.path, { version: 1, sandboxes } satisfies StoreFile);
  }
}
