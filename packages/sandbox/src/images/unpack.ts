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
import { at, lstatAt } from './dirfd.ts';
import { type Budget, DEFAULT_IMAGE_LIMITS, UnpackBudget } from './limits.ts';
import { existingDir, hostile, IS_ROOT, Tree, UMASK, type UnpackStats } from './unpack-tree.ts';

export type { UnpackStats } from './unpack-tree.ts';

/** Options of {@link extractLayer}. */
export interface ExtractOptions {
  /**
   * Budgets every entry and byte is taken from (e.g. the layer's, the image's and the store's); default one budget of
   * `DEFAULT_IMAGE_LIMITS.maxLayerBytes` / `maxLayerEntries`.
   */
  budgets?: Budget[];
}

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fs.constants;
const CREATE_FLAGS = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
/** Longest entry name (bytes) and most components accepted. */
const MAX_NAME = 4096;
const MAX_COMPONENTS = 1024;

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
