/**
 * The client side of the snapshot routes (`snapshot-routes.ts`) for `RestBox` and `RestRuntime`:
 * `box.snapshot.*`, `box.export(path)` (the archive is streamed from the server into the local file),
 * `runtime.cloneBox` and `runtime.importBox(path)` (the local archive is streamed to the server).
 */

import { closeSync, createReadStream, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { BoxError } from '../errors.ts';
import { fdSink } from '../runtime/files/pump.ts';
import type { SnapshotInfo, SnapshotOps } from '../runtime/snapshots.ts';
import type { JsBoxInfo, JsBoxOptions } from '../types.ts';
import type { Connection } from './client.ts';
import { toSnake } from './wire.ts';

/** The snapshot operations of the box at `boxPath` (`/v1/boxes/<id>`) over REST. */
export function restSnapshotOps(conn: Connection, boxPath: string): SnapshotOps {
  const one = (name: string) => `${boxPath}/snapshots/${encodeURIComponent(name)}`;
  return {
    create: (name) =>
      conn.call<SnapshotInfo>('POST', `${boxPath}/snapshots`, name === undefined ? {} : { name }),
    list: () => conn.call<SnapshotInfo[]>('GET', `${boxPath}/snapshots`),
    get: (name) => conn.call<SnapshotInfo | null>('GET', one(name), undefined, true),
    restore: async (name) => {
      await conn.call('POST', `${one(name)}/restore`);
    },
    remove: async (name) => {
      await conn.call('DELETE', one(name));
    },
  };
}

/**
 * Downloads the box's archive (`GET <boxPath>/export`) into `path` (written to `<path>.part`, renamed
 * when complete). Each chunk is written to the file before the next is read (`fdSink`): the download
 * reuses one buffer.
 * @throws BoxError `invalid_option` (field `path`) when it cannot be written; server errors as mapped.
 */
export async function restExport(conn: Connection, boxPath: string, path: string): Promise<void> {
  if (typeof path !== 'string' || path === '') {
    throw new BoxError('invalid export path: must be a file path', { field: 'path' });
  }
  const part = `${path}.part`;
  let fd: number;
  try {
    fd = openSync(part, 'w');
  } catch (error) {
    throw new BoxError(`export: cannot write '${path}': ${(error as Error).message}`, { field: 'path' });
  }
  try {
    await conn.download(`${boxPath}/export`, fdSink(fd));
    closeSync(fd);
    renameSync(part, path);
  } catch (error) {
    try {
      closeSync(fd);
    } catch {}
    rmSync(part, { force: true });
    throw error;
  }
}

/**
 * Uploads the archive at `path` (`POST /v1/boxes/import[?name=]`); `options` (camelCase box options,
 * passed again over the archive's) travel as JSON in the `X-Box-Options` header, snake_case, with
 * non-ASCII characters as `\u` escapes (header values are ASCII). Resolves the new box's info.
 * @throws BoxError `not_found` (field `path`) when the file does not exist; server errors as mapped.
 */
export function restImport(
  conn: Connection,
  path: string,
  name?: string,
  options?: JsBoxOptions,
): Promise<JsBoxInfo> {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return Promise.reject(
      new BoxError(`import: '${path}' does not exist`, { field: 'path', code: 'not_found' }),
    );
  }
  const query = name === undefined ? '' : `?name=${encodeURIComponent(name)}`;
  const headers: Record<string, string> =
    options === undefined
      ? {}
      : {
          'x-box-options': JSON.stringify(toSnake(options)).replace(
            /[^\x20-\x7e]/g,
            (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
          ),
        };
  return conn.upload<JsBoxInfo>('POST', `/v1/boxes/import${query}`, createReadStream(path), size, headers);
}
