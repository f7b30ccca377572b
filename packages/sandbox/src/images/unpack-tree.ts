/**
 * The open directory handles of one layer unpack (`unpack.ts`): a bounded look-up cache by path, walked
 * one name at a time with `O_NOFOLLOW`, and the work applied after the entries (whiteouts, opaque
 * markers, directory owners, modes and times), kept on the handle of the directory it belongs to.
 */
import fs from 'node:fs';
import { BoxError } from '../errors.ts';
import { at, atForChild, DIR_FLAGS, isRemoved, lstatAt, openDirAt, removeAt, runBatched } from './dirfd.ts';

/** What an unpack produced. `bytes` counts regular file content written. */
export interface UnpackStats {
  entries: number;
  bytes: number;
  whiteouts: number;
  opaqueDirs: number;
}

/** True when this process runs as root (owners are kept, `trusted.*` xattrs are used). */
export const IS_ROOT = process.getuid?.() === 0;
/**
 * Xattr of an opaque directory: `trusted.overlay.opaque` for root's store; an ordinary account cannot
 * set `trusted.*` and mounts its overlays in a user namespace with `userxattr`, which reads
 * `user.overlay.opaque` instead (engine/rootless-scripts.ts).
 */
const OPAQUE_XATTR = IS_ROOT ? 'trusted.overlay.opaque' : 'user.overlay.opaque';
/** The process umask, to know when a mode needs an explicit `fchmod`. */
export const UMASK = process.umask();
/** Directory handles kept for path look-ups, and handles with deferred work before it is applied early. */
const CACHE_MAX = 256;
const PENDING_MAX = 1024;

/** Refused layer content: a `BoxError` with code `image`. */
export function hostile(message: string): BoxError {
  return new BoxError(message, { code: 'image' });
}

/** An open directory of the layer and the work deferred on it. */
export interface DirHandle {
  fd: number;
  rel: string;
  closed?: boolean;
  meta?: { mode: number; uid: number; gid: number; mtime: Date };
  opaque?: boolean;
  whiteouts?: string[];
}

/** The open handles of one unpack: a bounded look-up cache by path, and the handles with deferred work. */
export class Tree {
  readonly root: DirHandle;
  private readonly cache = new Map<string, DirHandle>();
  private readonly pending = new Set<DirHandle>();
  readonly stats: UnpackStats = { entries: 0, bytes: 0, whiteouts: 0, opaqueDirs: 0 };

  constructor(rootPath: string) {
    this.root = { fd: fs.openSync(rootPath, DIR_FLAGS), rel: '' };
  }

  private release(h: DirHandle): void {
    if (h.closed || h === this.root || this.pending.has(h) || this.cache.get(h.rel) === h) return;
    h.closed = true;
    fs.closeSync(h.fd);
  }

  private remember(h: DirHandle): void {
    if (this.cache.size >= CACHE_MAX) {
      const old = [...this.cache.values()];
      this.cache.clear();
      for (const o of old) this.release(o);
    }
    this.cache.set(h.rel, h);
  }

  /** Forgets cached handles of `rel` and below (it is being replaced). */
  forget(rel: string): void {
    for (const [key, h] of this.cache) {
      if (key === rel || key.startsWith(`${rel}/`)) {
        this.cache.delete(key);
        this.release(h);
      }
    }
  }

  /**
   * The handle of directory `rel`, each missing component made (mode 0755) and each non-directory in the
   * way replaced, walking from the deepest cached ancestor one name at a time.
   * @throws BoxError `image` when a component is a symlink (`shown` names the entry).
   */
  dir(rel: string, shown: string): DirHandle {
    if (rel === '') return this.root;
    const hit = this.cache.get(rel);
    if (hit) return hit;
    const parts = rel.split('/');
    let i = parts.length - 1;
    let cur = this.root;
    for (; i > 0; i--) {
      const found = this.cache.get(parts.slice(0, i).join('/'));
      if (found) {
        cur = found;
        break;
      }
    }
    for (; i < parts.length; i++) {
      const name = parts[i]!;
      const childRel = parts.slice(0, i + 1).join('/');
      const fd = this.enter(cur.fd, name, childRel, shown);
      const next: DirHandle = { fd, rel: childRel };
      if (cur !== this.root && this.cache.get(cur.rel) !== cur) this.release(cur);
      this.remember(next);
      cur = next;
    }
    return cur;
  }

  /** Opens (making or replacing as needed) the directory `name` in `dirfd`. */
  private enter(dirfd: number, name: string, rel: string, shown: string): number {
    const st = lstatAt(dirfd, name);
    if (st?.isSymbolicLink()) throw hostile(`entry '${shown}' would be written through symlink '${rel}'`);
    if (st && !st.isDirectory()) removeAt(dirfd, name);
    if (!st?.isDirectory()) fs.mkdirSync(at(dirfd, name), { mode: 0o755 });
    return openDirAt(dirfd, name);
  }

  /** Removes what is at `name` in `parent` (rel `rel`), dropping cached handles below it. */
  clear(parent: DirHandle, name: string, rel: string): void {
    this.forget(rel);
    removeAt(parent.fd, name);
  }

  /** Queues work on `h` for {@link flush}; flushes first when too many handles are held. */
  async defer(h: DirHandle, apply: (h: DirHandle) => void): Promise<void> {
    if (this.pending.size >= PENDING_MAX && !this.pending.has(h)) await this.flush(false);
    apply(h);
    this.pending.add(h);
  }

  /**
   * Applies deferred work on the handles: whiteouts (where the name is still free: an entry of the same
   * layer wins, image-spec "Whiteouts"), opaque markers, then directory owners, modes and times.
   * Directories removed by later entries are skipped. `final` false (too many handles held) keeps owner
   * rwx on directories of an ordinary account so that later entries can still be written into them.
   */
  async flush(final: boolean): Promise<void> {
    const live = [...this.pending].filter((h) => !isRemoved(h.fd));
    const devices: string[] = [];
    const opaque: string[] = [];
    for (const h of live) {
      for (const name of h.whiteouts ?? []) if (!lstatAt(h.fd, name)) devices.push(atForChild(h.fd, name));
      if (h.opaque) opaque.push(atForChild(h.fd));
    }
    if (devices.length > 0) {
      await runBatched(
        'sh',
        ['-c', 'for p do mknod -- "$p" c 0 0 || exit 1; done', 'sh'],
        devices,
        'overlay whiteouts',
      );
      this.stats.whiteouts += devices.length;
    }
    if (opaque.length > 0) {
      await runBatched('setfattr', ['-n', OPAQUE_XATTR, '-v', 'y', '--'], opaque, 'opaque directory markers');
      this.stats.opaqueDirs += opaque.length;
    }
    for (const h of live) {
      const m = h.meta;
      if (!m) continue;
      if (IS_ROOT && (m.uid !== 0 || m.gid !== 0)) fs.fchownSync(h.fd, m.uid, m.gid);
      const mode = final || IS_ROOT ? m.mode : m.mode | 0o700;
      if (mode !== 0o755 || mode & UMASK) fs.fchmodSync(h.fd, mode);
      fs.futimesSync(h.fd, m.mtime, m.mtime);
    }
    const done = [...this.pending];
    this.pending.clear();
    for (const h of done) {
      h.meta = undefined;
      h.opaque = undefined;
      h.whiteouts = undefined;
      this.release(h);
    }
  }

  /** Closes every handle (after success or failure). */
  close(): void {
    const all = new Set([...this.cache.values(), ...this.pending, this.root]);
    this.cache.clear();
    this.pending.clear();
    for (const h of all) {
      if (!h.closed) fs.closeSync(h.fd);
      h.closed = true;
    }
  }
}

/**
 * The handle of an existing directory `rel` (never made, never through a symlink), or null; `close` says
 * the caller closes it.
 */
export function existingDir(tree: Tree, rel: string): { fd: number; close: boolean } | null {
  if (rel === '') return { fd: tree.root.fd, close: false };
  let fd = tree.root.fd;
  for (const name of rel.split('/')) {
    let next: number;
    try {
      next = fs.openSync(at(fd, name), DIR_FLAGS);
    } catch {
      if (fd !== tree.root.fd) fs.closeSync(fd);
      return null;
    }
    if (fd !== tree.root.fd) fs.closeSync(fd);
    fd = next;
  }
  return { fd, close: true };
}
