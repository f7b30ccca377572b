/**
 * Entries as the files backends report them (`JsEntryInfo`): the bound on one listing, the
 * `rwxr-xr-x` form of mode bits, and the entry of an `lstat` result with ids as the box sees them.
 */
import type { Stats } from 'node:fs';
import { boxId, type FileUser } from './root.ts';
import type { JsEntryInfo } from './types.ts';

/** Entries `list` returns at most (a box must not make the host build an unbounded array). */
export const MAX_LIST_ENTRIES = 100_000;

/** `rwxr-xr-x` for mode bits. */
export function permissionString(mode: number): string {
  const chars = 'rwxrwxrwx';
  let out = '';
  for (let i = 0; i < 9; i++) out += mode & (0o400 >> i) ? chars[i] : '-';
  return out;
}

/**
 * Builds a `JsEntryInfo` from `lstat` results; `uid`/`gid` are reported as the box sees them (host
 * ids translated by `user`'s id maps, when given).
 */
export function entryOf(
  st: Stats,
  path: string,
  name: string,
  target?: string,
  user?: FileUser,
): JsEntryInfo {
  const type = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other';
  return {
    name,
    path,
    type,
    size: st.size,
    mode: st.mode & 0o7777,
    permissions: permissionString(st.mode),
    uid: boxId(user?.uidMap, st.uid),
    gid: boxId(user?.gidMap, st.gid),
    modifiedTime: st.mtime,
    ...(target !== undefined ? { symlinkTarget: target } : {}),
  };
}
