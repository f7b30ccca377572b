/**
 * Unpacking of one OCI layer (image-spec layer.md "Changesets") into a directory that is used directly as an
 * overlayfs lower dir: OCI whiteouts `.wh.<name>` become overlay whiteouts (character device 0:0) and opaque
 * markers `.wh..wh..opq` become the `trusted.overlay.opaque=y` xattr (`user.overlay.opaque` in an ordinary
 * account's store, whose overlays use `userxattr`; kernel Documentation/filesystems/
 * overlayfs.rst "whiteouts and opaque directories").
 *
 * Containment by construction (SECURITY.md "Images and box archives"): the root is opened once as a
 * directory handle and every operation acts on a handle plus one name (`dirfd.ts`): directories are
 * entered with `O_DIRECTORY | O_NOFOLLOW`, files created with `O_CREAT | O_EXCL | O_NOFOLLOW`, metadata
 * set with `fchown`/`fchmod`/`futimes` on descriptors. No host path is ever resolved through a name or
 * link of the layer. Operations applied after the entries (whiteouts, opaque markers, directory owners,
 * modes and times) keep the handle of the directory taken when their entry was read: a later entry that
 * replaces that directory by a symlink leaves them acting on the original (by then orphaned) directory,
 * never on the symlink's target (the class of umoci CVE-2021-29136 and of containerd's whiteout fixes).
 *
 * Names climbing above the root with `..` are refused; absolute names land below the root; a parent that
 * the layer made a symlink is refused; hard links resolve through handles inside the layer. Symlink
 * *targets* are stored verbatim (the kernel resolves them inside the box). Device nodes and FIFOs are
 * skipped. Owners are kept when running as root; modes, setuid bits and mtimes are kept.
 *
 * Bounds: every entry and every byte (header sizes, skipped entries included) is taken from the
 * budgets given (`limits.ts`) before it is written, so a bomb stops at its bound.
 *
 * File writes are synchronous on purpose: one syscall each, no thread-pool round trips, while gzip/zstd
 * decompression runs on the libuv pool in parallel.
 */
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import tar, { type Header } from 'tar-stream';
import { BoxError } from '../errors.ts';
import { at, atForChild, DIR_FLAGS, isRemoved, lstatAt, openDirAt, removeAt, runBatched } from './dirfd.ts';
import { DEFAULT_IMAGE_LIMITS, UnpackBudget } from './limits.ts';

/** What an unpack produced. `bytes` counts regular file content written. */
export interface UnpackStats {
  entries: number;
  bytes: number;
  whiteouts: number;
  opaqueDirs: number;
}

/** Options of {@link extractLayer}. */
export interface ExtractOptions {
  /**
   * Budgets every entry and byte is taken from (e.g. the layer's and the image's); default one budget of
   * `DEFAULT_IMAGE_LIMITS.maxLayerBytes` / `maxLayerEntries`.
   */
  budgets?: UnpackBudget[];
}

const IS_ROOT = process.getuid?.() === 0;
/**
 * Xattr of an opaque directory: `trusted.overlay.opaque` for root's store; an ordinary account cannot
 * set `trusted.*` and mounts its overlays in a user namespace with `userxattr`, which reads
 * `user.overlay.opaque` instead (engine/rootless-scripts.ts).
 */
const OPAQUE_XATTR = IS_ROOT ? 'trusted.overlay.opaque' : 'user.overlay.opaque';
const UMASK = process.umask();
const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
const CREATE_FLAGS = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
/** Longest entry name (bytes) and most components accepted. */
const MAX_NAME = 4096;
const MAX_COMPONENTS = 1024;
/** Directory handles kept for path look-ups, and handles with deferred work before it is applied early. */
const CACHE_MAX = 256;
const PENDING_MAX = 1024;

/** Refused layer content: a `BoxError` with code `image`. */
function hostile(message: string): BoxError {
  return new BoxError(message, { code: 'image' });
}

/**
 * Normalizes a tar entry name to a relative path inside the root (`a/b`), or '' for the root itself.
 * @throws BoxError `image` when it climbs above the root or is longer than 4096 bytes / 1024 components.
 */
export function safeRelative(name: string): string {
  if (name.length > MAX_NAME) throw hostile(`entry name longer than ${MAX_NAME} bytes`);
  const out: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length === 0) throw hostile(`entry '${name}' escapes the layer root`);
      out.pop();
    } else out.push(part);
  }
  if (out.length > MAX_COMPONENTS)
    throw hostile(`entry '${name.slice(0, 64)}…' is deeper than ${MAX_COMPONENTS} levels`);
  return out.join('/');
}

function parentOf(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

/** An open directory of the layer and the work deferred on it. */
interface DirHandle {
  fd: number;
  rel: string;
  closed?: boolean;
  meta?: { mode: number; uid: number; gid: number; mtime: Date };
  opaque?: boolean;
  whiteouts?: string[];
}

/** The open handles of one unpack: a bounded look-up cache by path, and the handles with deferred work. */
class Tree {
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
 * Extracts an uncompressed tar stream into `root` (an existing empty directory that nothing else writes
 * while it is unpacked). See the module comment for what is refused and what is guaranteed.
 * @throws BoxError `image` naming the entry on hostile content and naming the bound on a budget overrun;
 *   the caller discards the directory then.
 */
export async function extractLayer(
  tarStream: Readable,
  root: string,
  options: ExtractOptions = {},
): Promise<UnpackStats> {
  const budgets = options.budgets ?? [
    new UnpackBudget(
      { name: 'maxLayerBytes', max: DEFAULT_IMAGE_LIMITS.maxLayerBytes },
      { name: 'maxLayerEntries', max: DEFAULT_IMAGE_LIMITS.maxLayerEntries },
    ),
  ];
  // All budgets or none: a refusal by one gives back what the others took for the same entry.
  const take = (bytes: number, entries: number) => {
    let i = 0;
    try {
      for (; i < budgets.length; i++) budgets[i]!.take(bytes, entries);
    } catch (error) {
      for (let j = 0; j < i; j++) budgets[j]!.give(bytes, entries);
      throw error;
    }
  };
  const tree = new Tree(root);
  const extract = tar.extract();
  tarStream.on('error', (e) => extract.destroy(e));
  tarStream.pipe(extract);
  try {
    for await (const entry of extract) {
      try {
        await applyEntry(tree, entry as unknown as Entry, take);
      } catch (error) {
        if (error instanceof BoxError) throw error;
        throw new BoxError(`cannot unpack entry '${entry.header.name}': ${(error as Error).message}`, {
          code: 'image',
          cause: error,
        });
      } finally {
        entry.resume();
      }
    }
    await tree.flush(true);
    return tree.stats;
  } catch (error) {
    extract.destroy();
    tarStream.unpipe(extract);
    throw error;
  } finally {
    tree.close();
  }
}

type Entry = Readable & AsyncIterable<Buffer> & { header: Header };

async function applyEntry(
  tree: Tree,
  entry: Entry,
  take: (bytes: number, entries: number) => void,
): Promise<void> {
  const h = entry.header;
  const size = h.size ?? 0;
  take(h.type === 'directory' || h.type === 'symlink' || h.type === 'link' ? 0 : size, 1);
  tree.stats.entries++;
  const rel = safeRelative(h.name);
  const base = rel.slice(rel.lastIndexOf('/') + 1);
  const mode = (h.mode ?? 0o644) & 0o7777;
  const uid = h.uid ?? 0;
  const gid = h.gid ?? 0;
  const mtime = h.mtime ?? new Date(0);
  if (rel === '') {
    // The root itself: keep its mode and owner, applied at the end.
    if (h.type === 'directory')
      await tree.defer(tree.root, (d) => {
        d.meta = { mode, uid, gid, mtime };
      });
    return;
  }
  const parentRel = parentOf(rel);
  if (base.startsWith('.wh.')) {
    const parent = tree.dir(parentRel, h.name);
    if (base === '.wh..wh..opq') {
      await tree.defer(parent, (d) => {
        d.opaque = true;
      });
      return;
    }
    const target = base.slice(4);
    if (target === '' || target === '.' || target === '..') throw hostile(`bad whiteout '${h.name}'`);
    await tree.defer(parent, (d) => {
      d.whiteouts ??= [];
      d.whiteouts.push(target);
    });
    return;
  }
  switch (h.type) {
    case 'file':
    case 'contiguous-file':
    case null:
    case undefined: {
      const parent = tree.dir(parentRel, h.name);
      let fd: number;
      try {
        fd = fs.openSync(at(parent.fd, base), CREATE_FLAGS, mode);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
        tree.clear(parent, base, rel);
        fd = fs.openSync(at(parent.fd, base), CREATE_FLAGS, mode);
      }
      try {
        let written = 0;
        for await (const chunk of entry) {
          // Header sizes were taken up front; a body longer than its header is refused by tar-stream.
          let off = 0;
          while (off < chunk.length) off += fs.writeSync(fd, chunk, off);
          written += chunk.length;
        }
        tree.stats.bytes += written;
        if (mode & UMASK) fs.fchmodSync(fd, mode);
        if (IS_ROOT && (uid !== 0 || gid !== 0)) {
          fs.fchownSync(fd, uid, gid);
          if (mode & 0o6000) fs.fchmodSync(fd, mode); // chown clears setuid/setgid
        }
        fs.futimesSync(fd, mtime, mtime);
      } finally {
        fs.closeSync(fd);
      }
      return;
    }
    case 'directory': {
      // An entry replaces what is there; only a parent that is a symlink is refused.
      const parent = tree.dir(parentRel, h.name);
      const st = lstatAt(parent.fd, base);
      if (st && !st.isDirectory()) tree.clear(parent, base, rel);
      const d = tree.dir(rel, h.name);
      await tree.defer(d, (x) => {
        x.meta = { mode, uid, gid, mtime };
      });
      return;
    }
    case 'symlink': {
      const parent = tree.dir(parentRel, h.name);
      const target = h.linkname ?? '';
      if (lstatAt(parent.fd, base)) tree.clear(parent, base, rel);
      fs.symlinkSync(target, at(parent.fd, base));
      if (IS_ROOT && (uid !== 0 || gid !== 0)) fs.lchownSync(at(parent.fd, base), uid, gid);
      fs.lutimesSync(at(parent.fd, base), mtime, mtime);
      return;
    }
    case 'link': {
      const target = safeRelative(h.linkname ?? '');
      const missing = () =>
        hostile(`hard link '${h.name}' points to '${h.linkname}', which is not in the layer`);
      if (target === '') throw missing();
      const tbase = target.slice(target.lastIndexOf('/') + 1);
      const tparent = existingDir(tree, parentOf(target));
      if (!tparent) throw missing();
      try {
        const st = lstatAt(tparent.fd, tbase);
        if (!st) throw missing();
        if (st.isDirectory()) throw hostile(`hard link '${h.name}' points to a directory`);
        if (target === rel) return;
        if (target.startsWith(`${rel}/`)) throw hostile(`hard link '${h.name}' points below itself`);
        const parent = tree.dir(parentRel, h.name);
        if (lstatAt(parent.fd, base)) tree.clear(parent, base, rel);
        fs.linkSync(at(tparent.fd, tbase), at(parent.fd, base));
      } finally {
        if (tparent.close) fs.closeSync(tparent.fd);
      }
      return;
    }
    default:
      // character/block devices, FIFOs and unknown types are skipped (a box gets its own /dev).
      return;
  }
}

/**
 * The handle of an existing directory `rel` (never made, never through a symlink), or null; `close` says
 * the caller closes it.
 */
function existingDir(tree: Tree, rel: string): { fd: number; close: boolean } | null {
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
