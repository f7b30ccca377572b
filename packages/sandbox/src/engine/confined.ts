/**
 * Host-side file operations confined to a box root, for code that runs as host root and touches
 * files a box (or its image) controls: the user database read for `user:`, `/etc/resolv.conf` and the
 * CA bundle of secrets written before the box's commands run, executables looked up for tty execs.
 *
 * Node has no openat2(2), so the walk is done with directory descriptors: every component is looked up
 * in the descriptor of its parent through `/proc/self/fd/<dir>/<name>` (the magic link is the
 * directory itself, as openat(2) would use it) with `O_NOFOLLOW`, never through a path string the box
 * could change between a check and a use. Symlinks are resolved as the box sees them
 * (`RESOLVE_IN_ROOT`: an absolute target starts again at the box root) and `..` stops at the root;
 * neither is ever handed to the kernel. A box can therefore make a lookup fail, never make it leave
 * its root, even while the box runs.
 */

import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
  readSync,
  renameSync,
  type Stats,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { BoxError, type BoxErrorCode } from '../errors.ts';

/** `O_PATH` (Linux asm-generic value, x86_64 and arm64): a descriptor for lookups and fstat only. */
const O_PATH = 0o10000000;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** Symlinks followed in one lookup before it fails, as the kernel's `MAXSYMLINKS`. */
const MAX_SYMLINKS = 40;
/** Largest file `readFileInRoot` reads, bytes (a box must not make the engine allocate without bound). */
export const MAX_CONFINED_READ_BYTES = 4 * 1024 * 1024;

/** Owner given to files and directories created in a box root (a user namespace's mapped root). */
export interface ConfinedOwner {
  uid: number;
  gid: number;
}

function at(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException).code;
}

function splitPath(path: string): string[] {
  return path.split('/').filter((c) => c !== '' && c !== '.');
}

/** A walk inside a root: the open directory descriptors from the root down to the current directory. */
class Walk {
  readonly fds: number[];
  readonly inBoxPath: string;
  private links = 0;

  constructor(root: string, inBoxPath: string) {
    this.inBoxPath = inBoxPath;
    let fd: number;
    try {
      // The root itself is the caller's (trusted) path and may be a magic link such as /proc/<pid>/root.
      fd = openSync(root, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (err) {
      throw new BoxError(`box root ${root}: cannot open (${code(err) ?? (err as Error).message})`, {
        code: 'internal',
      });
    }
    this.fds = [fd];
  }

  get dir(): number {
    return this.fds[this.fds.length - 1] as number;
  }

  close(): void {
    for (const fd of this.fds.splice(0)) closeSync(fd);
  }

  /** Throws the walk's BoxError: `'<path>' in the box: <rule>` with `code` (default `internal`). */
  fail(rule: string, code: BoxErrorCode = 'internal'): never {
    throw new BoxError(`'${this.inBoxPath}' in the box: ${rule}`, { code });
  }

  /** Reads a symlink named `name` in the current directory, or undefined when it is not one (any more). */
  readLink(name: string): string | undefined {
    try {
      return readlinkSync(at(this.dir, name));
    } catch {
      return undefined;
    }
  }

  /** Queues a symlink's target in front of `rest` (an absolute one restarts at the root). */
  follow(target: string, rest: string[]): void {
    if (++this.links > MAX_SYMLINKS) this.fail('too many levels of symbolic links');
    if (target.startsWith('/')) while (this.fds.length > 1) closeSync(this.fds.pop() as number);
    rest.unshift(...splitPath(target));
  }

  /**
   * Walks `components` as directories (consumed from the front). With `create`, missing directories
   * are made (mode 0755, `owner` when given).
   * @throws BoxError when a component is not a directory or is missing (without `create`).
   */
  descend(components: string[], create?: { owner?: ConfinedOwner }): void {
    while (components.length > 0) {
      const name = components.shift() as string;
      if (name === '..') {
        if (this.fds.length > 1) closeSync(this.fds.pop() as number);
        continue;
      }
      try {
        this.fds.push(openSync(at(this.dir, name), DIR_FLAGS));
      } catch (err) {
        const c = code(err);
        if (c === 'ENOENT' && create) {
          try {
            mkdirSync(at(this.dir, name), { mode: 0o755 });
          } catch (e) {
            if (code(e) !== 'EEXIST') this.fail(`cannot create directory '${name}' (${code(e)})`);
          }
          if (create.owner) this.chownEntry(name, create.owner);
          components.unshift(name);
          continue;
        }
        if (c === 'ELOOP' || c === 'ENOTDIR') {
          const target = this.readLink(name);
          if (target !== undefined) {
            this.follow(target, components);
            continue;
          }
        }
        if (c === 'ENOENT') this.fail(`'${name}' does not exist`, 'not_found');
        if (c === 'ENOTDIR') this.fail(`'${name}' is not a directory`, 'conflict');
        this.fail(`cannot open '${name}' (${c})`);
      }
    }
  }

  private chownEntry(name: string, owner: ConfinedOwner): void {
    let fd: number | undefined;
    try {
      fd = openSync(at(this.dir, name), DIR_FLAGS);
      fchownSync(fd, owner.uid, owner.gid);
    } catch (err) {
      this.fail(`cannot set the owner of directory '${name}' (${code(err)})`);
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
}

/** Splits an absolute in-box path into its parent components and final name. */
function parentAndName(inBoxPath: string): { parent: string[]; name: string } {
  const parts = splitPath(inBoxPath);
  const name = parts.pop();
  if (name === undefined || name === '..')
    throw new BoxError(`'${inBoxPath}' in the box: must name a file`, { code: 'invalid_option' });
  return { parent: parts, name };
}

/**
 * Reads a regular file of a box, resolving `inBoxPath` inside `root` as the box would (symlinks
 * included, never leaving the root).
 * @param root host path of the box root (e.g. `<boxDir>/rootfs` or `/proc/<init>/root`); trusted.
 * @param inBoxPath absolute path inside the box.
 * @returns the content, or undefined when the file (or a directory on the way) does not exist.
 * @throws BoxError when the path is not a regular file, loops, or is larger than `MAX_CONFINED_READ_BYTES`.
 */
export function readFileInRoot(root: string, inBoxPath: string): Buffer | undefined {
  const walk: Walk = new Walk(root, inBoxPath);
  try {
    const rest = splitPath(inBoxPath);
    for (;;) {
      const name = rest.pop();
      if (name === undefined) walk.fail('is a directory');
      try {
        walk.descend(rest);
      } catch (err) {
        if (err instanceof BoxError && err.code === 'not_found') return undefined;
        throw err;
      }
      if (name === '..') walk.fail('must name a file', 'invalid_option');
      let fd: number;
      try {
        fd = openSync(at(walk.dir, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      } catch (err) {
        const c = code(err);
        if (c === 'ENOENT') return undefined;
        const target = c === 'ELOOP' ? walk.readLink(name) : undefined;
        if (target === undefined) walk.fail(`cannot open (${c})`);
        walk.follow(target, rest);
        continue;
      }
      try {
        const st = fstatSync(fd);
        if (!st.isFile()) walk.fail('is not a regular file', 'invalid_option');
        if (st.size > MAX_CONFINED_READ_BYTES) walk.fail(`is larger than ${MAX_CONFINED_READ_BYTES} bytes`);
        const buf = Buffer.alloc(st.size);
        let off = 0;
        while (off < buf.length) {
          const n = readSync(fd, buf, off, buf.length - off, off);
          if (n === 0) break;
          off += n;
        }
        return buf.subarray(0, off);
      } finally {
        closeSync(fd);
      }
    }
  } finally {
    walk.close();
  }
}

/**
 * The `lstat` of an entry of a box (the final component is not followed; directories on the way are,
 * inside the root).
 * @returns the stats, or undefined when it does not exist.
 * @throws BoxError when a directory on the way is not one or symlinks loop.
 */
export function lstatInRoot(root: string, inBoxPath: string): Stats | undefined {
  const walk: Walk = new Walk(root, inBoxPath);
  try {
    const { parent, name } = parentAndName(inBoxPath);
    try {
      walk.descend(parent);
    } catch (err) {
      // A missing parent (`not_found`) or a file in the way (`conflict`, ENOTDIR): nothing there.
      if (err instanceof BoxError && (err.code === 'not_found' || err.code === 'conflict')) return undefined;
      throw err;
    }
    let fd: number;
    try {
      fd = openSync(at(walk.dir, name), O_PATH | constants.O_NOFOLLOW);
    } catch {
      return undefined;
    }
    try {
      return fstatSync(fd);
    } finally {
      closeSync(fd);
    }
  } finally {
    walk.close();
  }
}

/**
 * Writes a file into a box, replacing whatever entry has that name (a symlink is replaced, never
 * followed; a directory is an error). Missing parent directories are created (mode 0755). The file is
 * written under a temporary name and renamed into place, so the box never sees half of it.
 * @param root host path of the box root; trusted.
 * @param inBoxPath absolute path inside the box; its directories are resolved inside the root.
 * @param data content.
 * @param options.mode file mode (default 0644); `owner`: uid/gid of new files and directories (default
 *   the owner of the box root directory: the box's mapped root in a user namespace, else host root).
 * @throws BoxError when a directory on the way cannot be used or the write fails.
 */
export function writeFileInRoot(
  root: string,
  inBoxPath: string,
  data: string | Buffer,
  options: { mode?: number; owner?: ConfinedOwner } = {},
): void {
  const walk: Walk = new Walk(root, inBoxPath);
  try {
    const { parent, name } = parentAndName(inBoxPath);
    const rootSt = fstatSync(walk.dir);
    const owner = options.owner ?? { uid: rootSt.uid, gid: rootSt.gid };
    walk.descend(parent, { owner });
    const tmp = `.sandbox-${randomBytes(6).toString('hex')}`;
    let fd: number;
    try {
      fd = openSync(
        at(walk.dir, tmp),
        constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
        0o600,
      );
    } catch (err) {
      walk.fail(`cannot create a file in its directory (${code(err)})`);
    }
    try {
      const buf = typeof data === 'string' ? Buffer.from(data) : data;
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
      fchownSync(fd, owner.uid, owner.gid);
      fchmodSync(fd, options.mode ?? 0o644);
    } catch (err) {
      closeSync(fd);
      try {
        unlinkSync(at(walk.dir, tmp));
      } catch {}
      walk.fail(`writing failed (${code(err) ?? (err as Error).message})`);
    }
    closeSync(fd);
    try {
      renameSync(at(walk.dir, tmp), at(walk.dir, name));
    } catch (err) {
      try {
        unlinkSync(at(walk.dir, tmp));
      } catch {}
      walk.fail(`cannot replace it (${code(err)})`);
    }
  } finally {
    walk.close();
  }
}
