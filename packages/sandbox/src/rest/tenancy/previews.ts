/**
 * Signed preview URLs: a token naming one port of one box, valid until it expires or is
 * revoked, that lets anyone holding it reach that port through `sandbox serve` without an API key. The
 * token (`pv_` + 32 random bytes, base64url) is shown once; the store keeps its SHA-256 digest, the box,
 * port, tenant and times in `previews.json` (atomic writes, read on start), so that a restart keeps the
 * URLs working. Expired records are dropped when the store is written.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { ulid } from 'ulid';
import { BoxError, notFound } from '../../errors.ts';
import { readJson, writeJsonAtomic } from './state-file.ts';

/** Token shape: `pv_` and 43 base64url characters. */
export const PREVIEW_TOKEN_RE = /^pv_[A-Za-z0-9_-]{43}$/;
/** Default lifetime of a preview URL, ms (1 hour). */
export const DEFAULT_PREVIEW_TTL_MS = 60 * 60_000;
/** Longest lifetime of a preview URL, ms (7 days). */
export const MAX_PREVIEW_TTL_MS = 7 * 24 * 60 * 60_000;

/** A preview URL's record as listed (never its token). Times are RFC 3339. */
export interface PreviewInfo {
  /** ULID naming it (for revocation). */
  id: string;
  boxId: string;
  port: number;
  tenant: string;
  createdAt: string;
  expiresAt: string;
}

interface PreviewRecord extends PreviewInfo {
  /** SHA-256 of the token, hex. */
  hash: string;
}

function digestHex(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

function publicInfo(record: PreviewRecord): PreviewInfo {
  const { hash: _hash, ...info } = record;
  return info;
}

/** The preview URLs of one server (see the module comment). */
export class PreviewStore {
  /** Path of the state file. */
  readonly path: string;
  #records: PreviewRecord[] | null = null;

  /** @param path the state file; read on first use. */
  constructor(path: string) {
    this.path = path;
  }

  #all(): PreviewRecord[] {
    this.#records ??= readJson<{ previews?: PreviewRecord[] }>(this.path, {}).previews ?? [];
    return this.#records;
  }

  #save(now = Date.now()): void {
    this.#records = this.#all().filter((r) => Date.parse(r.expiresAt) > now);
    writeJsonAtomic(this.path, { version: 1, previews: this.#records });
  }

  /**
   * Issues a token for `port` of `boxId` owned by `tenant`, valid `expiresInMs`.
   * @throws BoxError `invalid_option` naming `port` (1-65535) or `expires_in_ms` (1 ms to 7 days).
   */
  create(
    tenant: string,
    boxId: string,
    port: number,
    expiresInMs = DEFAULT_PREVIEW_TTL_MS,
  ): { token: string; info: PreviewInfo } {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new BoxError('invalid field port: must be an integer from 1 to 65535', { field: 'port' });
    }
    if (!Number.isInteger(expiresInMs) || expiresInMs < 1 || expiresInMs > MAX_PREVIEW_TTL_MS) {
      throw new BoxError(
        `invalid field expires_in_ms: must be an integer from 1 to ${MAX_PREVIEW_TTL_MS} (7 days)`,
        {
          field: 'expires_in_ms',
        },
      );
    }
    const token = `pv_${randomBytes(32).toString('base64url')}`;
    const now = Date.now();
    const record: PreviewRecord = {
      id: ulid(),
      boxId,
      port,
      tenant,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + expiresInMs).toISOString(),
      hash: digestHex(token),
    };
    this.#all().push(record);
    this.#save(now);
    return { token, info: publicInfo(record) };
  }

  /** The valid (unexpired, unrevoked) preview of `token`, or null; digests compared in constant time. */
  verify(token: string, now = Date.now()): PreviewInfo | null {
    if (!PREVIEW_TOKEN_RE.test(token)) return null;
    const hash = Buffer.from(digestHex(token), 'hex');
    for (const record of this.#all()) {
      if (timingSafeEqual(Buffer.from(record.hash, 'hex'), hash)) {
        return Date.parse(record.expiresAt) > now ? publicInfo(record) : null;
      }
    }
    return null;
  }

  /** The unexpired previews of `boxId`, oldest first. */
  list(boxId: string, now = Date.now()): PreviewInfo[] {
    return this.#all()
      .filter((r) => r.boxId === boxId && Date.parse(r.expiresAt) > now)
      .map(publicInfo);
  }

  /** Revokes preview `id` of `boxId`. @throws BoxError `not_found`. */
  revoke(boxId: string, id: string): void {
    const records = this.#all();
    const index = records.findIndex((r) => r.id === id && r.boxId === boxId);
    if (index < 0) throw notFound(`no preview URL '${id}' of box ${boxId}`);
    records.splice(index, 1);
    this.#save();
  }

  /** Revokes every preview of `boxId` (the box was removed). */
  revokeBox(boxId: string): void {
    const records = this.#all();
    if (!records.some((r) => r.boxId === boxId)) return;
    this.#records = records.filter((r) => r.boxId !== boxId);
    this.#save();
  }
}
