/**
 * BoxLite's `box.copyIn(hostPath, guestPath, options)` and `box.copyOut(guestPath, hostPath, options)`
 * over `box.files` (so the same code serves local and REST boxes), with BoxLite's `CopyOptions` and
 * defaults (`recursive`, `overwrite`, `includeParent` true; `followSymlinks` false) and `docker cp`
 * placement: a source copied onto an existing directory lands in `<dest>/<basename>` (directories only
 * with `includeParent`), otherwise it becomes `<dest>`. Files are streamed one at a time.
 */
import {
  closeSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  rmSync,
  type Stats,
  statSync,
  symlinkSync,
} from 'node:fs';
import { basename, join } from 'node:path';
import { BoxError, conflict, notFound } from '../../errors.ts';
import type { BoxFiles } from './files.ts';
import { fdSink } from './pump.ts';
import { checkBoxPath, joinPath } from './root.ts';
import type { CopyOptions, JsEntryInfo } from './types.ts';

interface Resolved {
  recursive: boolean;
  overwrite: boolean;
  followSymlinks: boolean;
  includeParent: boolean;
}

/** Checks `CopyOptions` and applies BoxLite's defaults. @throws BoxError naming the option. */
export function copyOptions(options: CopyOptions | undefined): Resolved {
  if (options !== undefined && (options === null || typeof options !== 'object')) {
    throw new BoxError('invalid copy option options: must be an object', { field: 'options' });
  }
  const out: Resolved = { recursive: true, overwrite: true, followSymlinks: false, includeParent: true };
  for (const key of Object.keys(options ?? {})) {
    if (!(key in out)) throw new BoxError(`invalid copy option ${key}: unknown option`, { field: key });
    const value = (options as Record<string, unknown>)[key];
    if (value === undefined) continue;
    if (typeof value !== 'boolean')
      throw new BoxError(`invalid copy option ${key}: must be a boolean`, { field: key });
    out[key as keyof Resolved] = value;
  }
  return out;
}

function hostStat(path: string, follow: boolean): Stats | null {
  try {
    return follow ? statSync(path) : lstatSync(path);
  } catch {
    return null;
  }
}

async function boxStat(files: BoxFiles, path: string): Promise<JsEntryInfo | null> {
  try {
    return await files.stat(path);
  } catch (error) {
    if (error instanceof BoxError && error.code === 'not_found') return null;
    throw error;
  }
}

/**
 * Copies a host file or directory into the box (BoxLite `copyIn`).
 * @throws BoxError `invalid_option` (paths, options, a directory without `recursive`), `not_found` (no
 *   host source), `conflict` (an existing file without `overwrite`).
 */
export async function copyIn(
  files: BoxFiles,
  hostPath: string,
  guestPath: string,
  options?: CopyOptions,
): Promise<void> {
  const o = copyOptions(options);
  if (typeof hostPath !== 'string' || hostPath === '') {
    throw new BoxError('invalid copy option hostPath: must be a non-empty path', { field: 'hostPath' });
  }
  checkBoxPath(guestPath, 'guestPath');
  const src = hostStat(hostPath, o.followSymlinks);
  if (!src) throw notFound(`host path '${hostPath}' does not exist`);
  if (src.isDirectory() && !o.recursive) {
    throw new BoxError('invalid copy option recursive: the source is a directory; set recursive: true', {
      field: 'recursive',
    });
  }
  const dest = await boxStat(files, guestPath);
  let target = guestPath;
  if (dest?.type === 'dir' && (!src.isDirectory() || o.includeParent))
    target = joinPath(guestPath.replace(/\/+$/, '') || '/', basename(hostPath));
  await copyInEntry(files, hostPath, target, src, o);
}

async function copyInEntry(
  files: BoxFiles,
  hostPath: string,
  guestPath: string,
  st: Stats,
  o: Resolved,
): Promise<void> {
  if (st.isDirectory()) {
    await files.makeDir(guestPath);
    for (const name of readdirSync(hostPath).sort()) {
      const child = join(hostPath, name);
      const childSt = hostStat(child, o.followSymlinks);
      if (childSt) await copyInEntry(files, child, joinPath(guestPath, name), childSt, o);
    }
    return;
  }
  if (!o.overwrite && (await boxStat(files, guestPath))) {
    throw conflict(`'${guestPath}' already exists in the box (overwrite: false)`);
  }
  if (st.isSymbolicLink()) {
    await files.symlink(guestPath, readlinkSync(hostPath));
    return;
  }
  if (!st.isFile()) return; // fifos, sockets, devices are not copied
  const fd = openSync(hostPath, 'r');
  try {
    await files.writeFromFd(guestPath, fd, st.mode & 0o7777);
  } finally {
    closeSync(fd);
  }
}

/**
 * Copies a file or directory of the box to the host (BoxLite `copyOut`). Box symlinks are recreated as
 * host symlinks with the same target text (never followed on the host), or with `followSymlinks` their
 * target's content is copied (resolved inside the box).
 * @throws BoxError `not_found` (no such box path), `invalid_option`, `conflict` (existing host file
 *   without `overwrite`).
 */
export async function copyOut(
  files: BoxFiles,
  guestPath: string,
  hostPath: string,
  options?: CopyOptions,
): Promise<void> {
  const o = copyOptions(options);
  checkBoxPath(guestPath, 'guestPath');
  if (typeof hostPath !== 'string' || hostPath === '') {
    throw new BoxError('invalid copy option hostPath: must be a non-empty path', { field: 'hostPath' });
  }
  let src = await files.stat(guestPath);
  if (src.type === 'symlink' && o.followSymlinks) src = await followed(files, src);
  if (src.type === 'dir' && !o.recursive) {
    throw new BoxError('invalid copy option recursive: the source is a directory; set recursive: true', {
      field: 'recursive',
    });
  }
  const dest = hostStat(hostPath, true);
  let target = hostPath;
  if (dest?.isDirectory() && (src.type !== 'dir' || o.includeParent)) target = join(hostPath, src.name);
  await copyOutEntry(files, src, target, o);
}

/** The entry a symlink leads to, as the box resolves it (files.list of its target is not needed). */
async function followed(files: BoxFiles, link: JsEntryInfo): Promise<JsEntryInfo> {
  const target = link.symlinkTarget!;
  const parent = link.path.slice(0, link.path.lastIndexOf('/')) || '/';
  const path = target.startsWith('/') ? target : joinPath(parent, target);
  const entry = await files.stat(path);
  return entry.type === 'symlink' ? followed(files, entry) : { ...entry, name: link.name, path: entry.path };
}

async function copyOutEntry(
  files: BoxFiles,
  entry: JsEntryInfo,
  hostPath: string,
  o: Resolved,
): Promise<void> {
  const existing = hostStat(hostPath, false);
  if (entry.type === 'dir') {
    if (existing && !existing.isDirectory()) {
      throw conflict(`host path '${hostPath}' exists and is not a directory`);
    }
    if (!existing) mkdirSync(hostPath, { mode: entry.mode & 0o777 });
    for (let child of await files.list(entry.path)) {
      if (child.type === 'symlink' && o.followSymlinks)
        child = await followed(files, child).catch(() => child);
      await copyOutEntry(files, child, join(hostPath, child.name), o);
    }
    return;
  }
  if (entry.type === 'other') return;
  if (existing) {
    if (!o.overwrite) throw conflict(`host path '${hostPath}' already exists (overwrite: false)`);
    if (existing.isDirectory()) throw conflict(`host path '${hostPath}' is a directory`);
    rmSync(hostPath, { force: true }); // a host symlink is replaced, never written through
  }
  if (entry.type === 'symlink') {
    symlinkSync(entry.symlinkTarget!, hostPath);
    return;
  }
  const fd = openSync(hostPath, 'wx', entry.mode & 0o777);
  try {
    await files.readInto(entry.path, fdSink(fd));
  } catch (error) {
    rmSync(hostPath, { force: true }); // no half-written host file is left behind
    throw error;
  } finally {
    closeSync(fd);
  }
}
