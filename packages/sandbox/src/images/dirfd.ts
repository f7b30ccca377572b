/**
 * Directory-handle file operations for the layer unpacker (`unpack.ts`): an `openat`-style API in pure
 * Node.js. Every operation names a directory by an open file descriptor and one entry name inside it,
 * spelled `/proc/self/fd/<dirfd>/<name>`: the kernel resolves the `/proc` magic link to the directory
 * inode that is already open (wherever it has moved to, whatever now sits at its old path), and a single
 * final component is never followed when it is a symlink (`O_NOFOLLOW`, `mkdir`, `symlink`, `link`,
 * `unlink`, `rmdir`, `lchown` and `lutimes` all act on the link itself). No path of more than one
 * component is ever resolved, so no content of a layer can redirect an operation out of the directory
 * tree the unpacker opened at its root (the `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` guarantee,
 * built from single-component steps as runc's `securejoin` and umoci's `unpriv` walkers do).
 *
 * Device nodes (overlay whiteouts) and extended attributes (opaque markers) have no Node.js call: a child
 * process gets `/proc/<our pid>/fd/<dirfd>[/<name>]`, which resolves the same way.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { BoxError } from '../errors.ts';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fs.constants;
/** Flags of a directory opened as a handle: never through a symlink. */
export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
/** Most levels `removeAt` descends (deeper trees are refused with an `image` error). */
export const MAX_DEPTH = 1024;

/** `<dirfd>/<name>` as a path this process can hand to one syscall; `name` is a single component. */
export function at(dirfd: number, name: string): string {
  return `/proc/self/fd/${dirfd}/${name}`;
}

/** The same as `at` for a child process (which has its own `/proc/self`); without `name`: the directory. */
export function atForChild(dirfd: number, name?: string): string {
  return name === undefined ? `/proc/${process.pid}/fd/${dirfd}` : `/proc/${process.pid}/fd/${dirfd}/${name}`;
}

/** `lstat` of `<dirfd>/<name>` (never following it), or null when nothing is there. */
export function lstatAt(dirfd: number, name: string): fs.Stats | null {
  return fs.lstatSync(at(dirfd, name), { throwIfNoEntry: false }) ?? null;
}

/** Opens the directory `<dirfd>/<name>` as a handle; throws ELOOP/ENOTDIR when it is not a directory. */
export function openDirAt(dirfd: number, name: string): number {
  return fs.openSync(at(dirfd, name), DIR_FLAGS);
}

/**
 * Removes whatever is at `<dirfd>/<name>` (a directory with everything below it, descending through
 * directory handles only); nothing there is fine.
 * @throws BoxError `image` when the tree is deeper than {@link MAX_DEPTH}; system errors otherwise.
 */
export function removeAt(dirfd: number, name: string, depth = 0): void {
  const st = lstatAt(dirfd, name);
  if (!st) return;
  if (!st.isDirectory()) {
    fs.unlinkSync(at(dirfd, name));
    return;
  }
  if (depth >= MAX_DEPTH)
    throw new BoxError(`layer directory tree deeper than ${MAX_DEPTH} levels`, { code: 'image' });
  const fd = openDirAt(dirfd, name);
  try {
    for (const child of fs.readdirSync(at(fd, ''))) removeAt(fd, child, depth + 1);
  } finally {
    fs.closeSync(fd);
  }
  fs.rmdirSync(at(dirfd, name));
}

/** True when the directory behind `fd` has been removed from the tree (an orphaned inode). */
export function isRemoved(fd: number): boolean {
  return fs.fstatSync(fd).nlink === 0;
}

const execFileP = promisify(execFile);

/**
 * Runs `cmd args… paths…` in chunks of 500 paths (the paths from {@link atForChild}).
 * @throws BoxError `image` naming the tool and its message (mknod needs root or CAP_MKNOD).
 */
export async function runBatched(cmd: string, args: string[], paths: string[], what: string): Promise<void> {
  for (let i = 0; i < paths.length; i += 500) {
    try {
      await execFileP(cmd, [...args, ...paths.slice(i, i + 500)]);
    } catch (e) {
      const err = e as Error & { stderr?: string };
      throw new BoxError(`cannot create ${what} with ${cmd}: ${(err.stderr || err.message).trim()}`, {
        code: 'image',
      });
    }
  }
}
