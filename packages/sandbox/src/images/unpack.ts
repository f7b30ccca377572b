/**
 * Unpacking of one OCI layer (image-spec layer.md "Changesets") into a directory that is used directly as an
 * overlayfs lower dir: OCI whiteouts `.wh.<name>` become overlay whiteouts (character device 0:0) and opaque
 * markers `.wh..wh..opq` become the `trusted.overlay.opaque=y` xattr (`user.overlay.opaque` in an ordinary
 * account's store, whose overlays use `userxattr`; kernel Documentation/filesystems/
 * overlayfs.rst "whiteouts and opaque directories").
 *
 * Containment: no entry may be written outside the layer root — names with `..` that climb above the root
 * are rejected, nothing is written through a symlink (parents that are symlinks are rejected, existing
 * entries are replaced, never followed), hard links must point inside the layer. Symlink *targets* are
 * stored verbatim (an absolute target is resolved inside the box by the kernel). Device nodes and FIFOs are
 * skipped. Ownership is kept when running as root; modes, setuid bits and mtimes are kept.
 *
 * File writes are synchronous on purpose: one syscall each, no thread-pool round trips, while gzip/zstd
 * decompression runs on the libuv pool in parallel.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import tar from 'tar-stream';
import { BoxError } from '../errors.ts';

/** What an unpack produced. `bytes` counts regular file content written. */
export interface UnpackStats {
  entries: number;
  bytes: number;
  whiteouts: number;
  opaqueDirs: number;
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

/**
 * Normalizes a tar entry name to a relative path inside the root (`a/b`), or '' for the root itself.
 * Throws when it climbs above the root.
 */
export function safeRelative(name: string): string {
  const out: string[] = [];
  for (const part of name.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length === 0) throw new Error(`entry '${name}' escapes the layer root`);
      out.pop();
    } else out.push(part);
  }
  return out.join('/');
}

function parentOf(rel: string): string {
  const i = rel.lastIndexOf('/');
  return i < 0 ? '' : rel.slice(0, i);
}

/** Removes whatever exists at `abs` (never following symlinks). */
function removeExisting(abs: string): void {
  fs.rmSync(abs, { recursive: true, force: true });
}

/**
 * Extracts an uncompressed tar stream into `root` (an existing empty directory). Rejects with an `Error`
 * naming the entry on hostile content; the caller discards the directory then.
 */
export async function extractLayer(tarStream: Readable, root: string): Promise<UnpackStats> {
  const stats: UnpackStats = { entries: 0, bytes: 0, whiteouts: 0, opaqueDirs: 0 };
  const symlinks = new Set<string>();
  const dirs = new Set<string>(['']);
  const dirMeta: { abs: string; mode: number; uid: number; gid: number; mtime: Date }[] = [];
  const whiteouts: string[] = [];
  const opaque: string[] = [];
  const extract = tar.extract();
  tarStream.on('error', (e) => extract.destroy(e));
  tarStream.pipe(extract);

  /** Ensures the parent directory chain of `rel` exists and contains no symlink. */
  const ensureParent = (rel: string, name: string) => {
    const parent = parentOf(rel);
    if (dirs.has(parent)) return;
    const parts = parent.split('/');
    let cur = '';
    for (const p of parts) {
      cur = cur ? `${cur}/${p}` : p;
      if (symlinks.has(cur)) throw new Error(`entry '${name}' would be written through symlink '${cur}'`);
      if (!dirs.has(cur)) {
        const abs = join(root, cur);
        try {
          fs.mkdirSync(abs, { mode: 0o755 });
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
          const st = fs.lstatSync(abs);
          if (!st.isDirectory()) {
            removeExisting(abs);
            fs.mkdirSync(abs, { mode: 0o755 });
          }
        }
        dirs.add(cur);
      }
    }
  };

  /** Marks `rel` as no longer a directory or symlink (it is being replaced). */
  const forget = (rel: string) => {
    symlinks.delete(rel);
    if (dirs.has(rel)) {
      for (const d of dirs) if (d === rel || d.startsWith(`${rel}/`)) dirs.delete(d);
      for (const s of symlinks) if (s.startsWith(`${rel}/`)) symlinks.delete(s);
    }
  };

  for await (const entry of extract) {
    const h = entry.header;
    stats.entries++;
    let rel: string;
    try {
      rel = safeRelative(h.name);
    } catch (e) {
      entry.resume();
      throw e;
    }
    const base = rel.slice(rel.lastIndexOf('/') + 1);
    const mode = (h.mode ?? 0o644) & 0o7777;
    const uid = h.uid ?? 0;
    const gid = h.gid ?? 0;
    const mtime = h.mtime ?? new Date(0);
    if (base.startsWith('.wh.')) {
      entry.resume();
      ensureParent(rel, h.name);
      const parent = parentOf(rel);
      if (base === '.wh..wh..opq') opaque.push(join(root, parent));
      else {
        const target = parent ? `${parent}/${base.slice(4)}` : base.slice(4);
        if (safeRelative(target) !== target || base.length === 4) throw new Error(`bad whiteout '${h.name}'`);
        whiteouts.push(join(root, target));
      }
      continue;
    }
    if (rel === '') {
      // The root itself: keep its mode and owner, applied at the end.
      entry.resume();
      if (h.type === 'directory') dirMeta.push({ abs: root, mode, uid, gid, mtime });
      continue;
    }
    ensureParent(rel, h.name);
    const abs = join(root, rel);
    switch (h.type) {
      case 'file':
      case 'contiguous-file':
      case null:
      case undefined: {
        forget(rel);
        let fd: number;
        try {
          fd = fs.openSync(abs, CREATE_FLAGS, mode);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') {
            entry.resume();
            throw e;
          }
          removeExisting(abs);
          fd = fs.openSync(abs, CREATE_FLAGS, mode);
        }
        try {
          for await (const chunk of entry) {
            const buf = chunk as Buffer;
            let off = 0;
            while (off < buf.length) off += fs.writeSync(fd, buf, off);
            stats.bytes += buf.length;
          }
          if (mode & UMASK) fs.fchmodSync(fd, mode);
          if (IS_ROOT && (uid !== 0 || gid !== 0)) {
            fs.fchownSync(fd, uid, gid);
            if (mode & 0o6000) fs.fchmodSync(fd, mode); // chown clears setuid/setgid
          }
          fs.futimesSync(fd, mtime, mtime);
        } finally {
          fs.closeSync(fd);
        }
        break;
      }
      case 'directory': {
        entry.resume();
        if (!dirs.has(rel)) {
          try {
            fs.mkdirSync(abs, { mode: 0o755 });
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
            if (!fs.lstatSync(abs).isDirectory()) {
              forget(rel);
              removeExisting(abs);
              fs.mkdirSync(abs, { mode: 0o755 });
            }
          }
          dirs.add(rel);
        }
        dirMeta.push({ abs, mode, uid, gid, mtime });
        break;
      }
      case 'symlink': {
        entry.resume();
        forget(rel);
        const target = h.linkname ?? '';
        try {
          fs.symlinkSync(target, abs);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
          removeExisting(abs);
          fs.symlinkSync(target, abs);
        }
        symlinks.add(rel);
        if (IS_ROOT && (uid !== 0 || gid !== 0)) fs.lchownSync(abs, uid, gid);
        fs.lutimesSync(abs, mtime, mtime);
        break;
      }
      case 'link': {
        entry.resume();
        const target = safeRelative(h.linkname ?? '');
        if (target === '' || !fs.lstatSync(join(root, target), { throwIfNoEntry: false })) {
          throw new Error(`hard link '${h.name}' points to '${h.linkname}', which is not in the layer`);
        }
        ensureParent(target, h.linkname ?? '');
        if (dirs.has(target)) throw new Error(`hard link '${h.name}' points to a directory`);
        forget(rel);
        try {
          fs.linkSync(join(root, target), abs);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
          removeExisting(abs);
          fs.linkSync(join(root, target), abs);
        }
        break;
      }
      default:
        // character/block devices, FIFOs and unknown types are skipped (a box gets its own /dev).
        entry.resume();
        break;
    }
  }

  if (whiteouts.length > 0) {
    for (const w of whiteouts) removeExisting(w);
    await runBatched('sh', ['-c', 'for p do mknod -- "$p" c 0 0 || exit 1; done', 'sh'], whiteouts);
    stats.whiteouts = whiteouts.length;
  }
  if (opaque.length > 0) {
    await runBatched('setfattr', ['-n', OPAQUE_XATTR, '-v', 'y', '--'], opaque);
    stats.opaqueDirs = opaque.length;
  }
  // Directory metadata last (deepest first), so that read-only directories and mtimes survive extraction.
  for (let i = dirMeta.length - 1; i >= 0; i--) {
    const d = dirMeta[i]!;
    if (IS_ROOT && (d.uid !== 0 || d.gid !== 0)) fs.lchownSync(d.abs, d.uid, d.gid);
    if (d.mode !== 0o755 || d.mode & UMASK) fs.chmodSync(d.abs, d.mode);
    fs.utimesSync(d.abs, d.mtime, d.mtime);
  }
  return stats;
}

const execFileP = promisify(execFile);

/** Runs `cmd args… paths…` in chunks of 500 paths. Throws naming the tool (mknod needs root/CAP_MKNOD). */
async function runBatched(cmd: string, args: string[], paths: string[]): Promise<void> {
  for (let i = 0; i < paths.length; i += 500) {
    try {
      await execFileP(cmd, [...args, ...paths.slice(i, i + 500)]);
    } catch (e) {
      const err = e as Error & { stderr?: string };
      throw new BoxError(
        `cannot create overlay whiteouts/opaque markers with ${cmd}: ${(err.stderr || err.message).trim()}`,
      );
    }
  }
}
