/**
 * BoxLite's `box.copyIn(hostPath, guestPath, options)` and `box.copyOut(guestPath, hostPath, options)`
 * over `box.files` (so the same code serves local and REST boxes), with BoxLite's `CopyOptions` and
 * defaults (`recursive`, `overwrite`, `includeParent` true; `followSymlinks` false) and `docker cp`
 * placement: a source copied onto an existing directory lands in `<dest>/<basename>` (directories only
 * with `includeParent`), otherwise it becomes `<dest>`; `copyOut` of a directory with `includeParent`
 * into a host path that does not exist yet makes `<dest>` and lays the directory out as
 * `<dest>/<basename>`, as BoxLite does. Files are streamed one at a time.
 *
 * On the host, everything at and below the named path is opened from held directory descriptors
 * without following symlinks (host.ts), and so is the way to it from the box's writable host folder
 * (a `hostPath` volume) it lies in; a path outside them is resolved up to its parent by the kernel as
 * given. A box sharing the host directory that swaps a directory for a symlink mid-copy makes the copy
 * fail with `conflict`, never read or write another host file.
 */
import { closeSync, realpathSync, type Stats } from 'node:fs';
import { BoxError, conflict, notFound } from '../../errors.ts';
import type { BoxFiles } from './files.ts';
import { type HostEntry, HostTree, hostError, MAX_HOST_DEPTH } from './host.ts';
import { fdSink } from './pump.ts';
import { checkBoxPath, components, joinPath } from './root.ts';
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
  const roots = await files.sharedHostRoots();
  const tree = new HostTree();
  try {
    let top = tree.top(hostPath, 'hostPath', roots);
    const named = top.name; // the name a copy into a box directory gets, followed link or not
    let src = tree.lstat(top);
    // `followSymlinks` follows the named path itself as the kernel resolves it (the caller's choice).
    if (src?.isSymbolicLink() && o.followSymlinks) {
      top = tree.top(realpathSync(hostPath), 'hostPath', roots);
      src = tree.lstat(top);
    }
    if (!src) throw notFound(`host path '${hostPath}' does not exist`);
    if (src.isDirectory() && !o.recursive) {
      throw new BoxError('invalid copy option recursive: the source is a directory; set recursive: true', {
        field: 'recursive',
      });
    }
    const dest = await boxStat(files, guestPath);
    let target = guestPath;
    if (dest?.type === 'dir' && (!src.isDirectory() || o.includeParent))
      target = joinPath(guestPath.replace(/\/+$/, '') || '/', named);
    await copyInEntry(files, tree, top, target, src, o, 0);
  } catch (error) {
    throw hostError(hostPath, error);
  } finally {
    tree.close();
  }
}

/** @throws BoxError `conflict` when a copied tree is nested deeper than `MAX_HOST_DEPTH`. */
function checkDepth(depth: number, path: string): void {
  if (depth > MAX_HOST_DEPTH) {
    throw new BoxError(`'${path}' is nested more than ${MAX_HOST_DEPTH} directories deep; copy a subtree`, {
      code: 'conflict',
    });
  }
}

/**
 * The entry a host symlink below the copied source leads to, for `followSymlinks`: only a relative
 * target without `..` (it stays in the link's directory), looked up one component at a time from
 * the link's directory without following further symlinks. Null otherwise (the link is copied as a
 * link). `opened` receives the directories opened on the way, for the caller to close.
 */
function followBelow(
  tree: HostTree,
  link: HostEntry,
  opened: number[],
): { entry: HostEntry; st: Stats } | null {
  const target = tree.readlink(link);
  const parts = components(target);
  if (target.startsWith('/') || parts.length === 0 || parts.includes('..')) return null;
  let dirFd = link.dirFd;
  let dirPath = link.path.slice(0, link.path.lastIndexOf('/'));
  for (const name of parts.slice(0, -1)) {
    try {
      dirFd = tree.openDir(tree.child(dirFd, dirPath, name));
    } catch {
      return null;
    }
    opened.push(dirFd);
    dirPath = `${dirPath}/${name}`;
  }
  const entry = tree.child(dirFd, dirPath, parts[parts.length - 1]!);
  const st = tree.lstat(entry);
  return st && !st.isSymbolicLink() ? { entry, st } : null;
}

async function copyInEntry(
  files: BoxFiles,
  tree: HostTree,
  host: HostEntry,
  guestPath: string,
  st: Stats,
  o: Resolved,
  depth: number,
): Promise<void> {
  checkDepth(depth, host.path);
  if (st.isDirectory()) {
    const dirFd = tree.openDir(host);
    try {
      await files.makeDir(guestPath);
      for (const name of tree.names(dirFd)) {
        let child = tree.child(dirFd, host.path, name);
        let childSt = tree.lstat(child);
        const opened: number[] = [];
        try {
          if (childSt?.isSymbolicLink() && o.followSymlinks) {
            const followed = followBelow(tree, child, opened);
            if (followed) ({ entry: child, st: childSt } = followed);
          }
          if (childSt)
            await copyInEntry(files, tree, child, joinPath(guestPath, name), childSt, o, depth + 1);
        } finally {
          for (const fd of opened) tree.closeDir(fd);
        }
      }
    } finally {
      tree.closeDir(dirFd);
    }
    return;
  }
  if (!o.overwrite && (await boxStat(files, guestPath))) {
    throw conflict(`'${guestPath}' already exists in the box (overwrite: false)`);
  }
  if (st.isSymbolicLink()) {
    await files.symlink(guestPath, tree.readlink(host));
    return;
  }
  if (!st.isFile()) return; // fifos, sockets, devices are not copied
  const opened = tree.openFile(host);
  if (!opened) return; // no longer a regular file: replaced meanwhile, nothing is read through it
  try {
    await files.writeFromFd(guestPath, opened.fd, opened.st.mode & 0o7777);
  } finally {
    closeSync(opened.fd);
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
  const roots = await files.sharedHostRoots();
  const tree = new HostTree();
  try {
    const top = tree.top(hostPath, 'hostPath', roots);
    const dest = tree.lstat(top);
    let target = top;
    if (dest?.isDirectory() && (src.type !== 'dir' || o.includeParent))
      target = tree.child(tree.openDir(top), top.path, src.name);
    else if (!dest && src.type === 'dir' && o.includeParent)
      // BoxLite (`docker cp` from the box): a directory with its parent lands in `<dest>/<name>`, `<dest>` made.
      target = tree.child(tree.makeDir(top, 0o755), top.path, src.name);
    await copyOutEntry(files, tree, src, target, o, 0);
  } catch (error) {
    throw hostError(hostPath, error);
  } finally {
    tree.close();
  }
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
  tree: HostTree,
  entry: JsEntryInfo,
  host: HostEntry,
  o: Resolved,
  depth: number,
): Promise<void> {
  checkDepth(depth, entry.path);
  const existing = tree.lstat(host);
  if (entry.type === 'dir') {
    if (existing && !existing.isDirectory()) {
      throw conflict(`host path '${host.path}' exists and is not a directory`);
    }
    const dirFd = existing ? tree.openDir(host) : tree.makeDir(host, entry.mode);
    try {
      for (let child of await files.list(entry.path)) {
        if (child.type === 'symlink' && o.followSymlinks)
          child = await followed(files, child).catch(() => child);
        await copyOutEntry(files, tree, child, tree.child(dirFd, host.path, child.name), o, depth + 1);
      }
    } finally {
      tree.closeDir(dirFd);
    }
    return;
  }
  if (entry.type === 'other') return;
  if (existing) {
    if (!o.overwrite) throw conflict(`host path '${host.path}' already exists (overwrite: false)`);
    if (existing.isDirectory()) throw conflict(`host path '${host.path}' is a directory`);
    tree.unlink(host); // a host symlink is replaced, never written through
  }
  if (entry.type === 'symlink') {
    tree.symlink(host, entry.symlinkTarget!);
    return;
  }
  const fd = tree.createFile(host, entry.mode);
  try {
    await files.readInto(entry.path, fdSink(fd));
  } catch (error) {
    tree.unlink(host); // no half-written host file is left behind
    throw error;
  } finally {
    closeSync(fd);
  }
}
