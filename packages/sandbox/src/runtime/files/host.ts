/**
 * Host-side file access for `copyIn`/`copyOut` (copy.ts) that never follows a symlink below the host
 * path the caller named, so that a box writing the same directory (a `hostPath` volume, SECURITY.md
 * "Shared folders") cannot redirect a host write or make the host read another host file.
 *
 * The caller's path is resolved once, up to its parent directory, by the kernel as given (the caller
 * chose it); that parent is held open and everything below it is reached one component at a time
 * from a held directory descriptor: `/proc/self/fd/<dir>/<name>` (the magic link is the held
 * directory itself, as openat(2) would use it) opened with `O_NOFOLLOW`, directories with
 * `O_DIRECTORY`, new files with `O_CREAT | O_EXCL | O_NOFOLLOW`, modes set with `fchmod` on the open
 * descriptor. A component swapped for a symlink between a look-up and its use makes the operation
 * fail (`ELOOP`, `ENOTDIR`, `EEXIST`); it never leaves the held directory.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  type Stats,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { BoxError, notFound } from '../../errors.ts';
import { at, errno } from './root.ts';

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** `O_NONBLOCK`: opening a fifo a box planted does not wait for a writer. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/** Directory levels a host copy descends at most (a box can nest directories without bound). */
export const MAX_HOST_DEPTH = 256;

/** An entry of a held host directory: the directory's descriptor and one component in it. */
export interface HostEntry {
  /** Descriptor of the directory holding the entry (owned by the `HostTree`). */
  dirFd: number;
  /** One component (never empty, `.`, `..` or containing `/`). */
  name: string;
  /** The host path, for messages only (never opened). */
  path: string;
}

/**
 * The held directories of one host-side copy; `close()` closes every descriptor it opened. Not
 * shared between copies.
 */
export class HostTree {
  readonly #fds: number[] = [];

  /**
   * Opens the parent directory of `hostPath` and returns the last component as an entry of it. When
   * the path lies inside one of `roots` (the box's writable host folders, compared after `..` and `.`
   * are resolved lexically), the parent is reached from that root one component at a time without
   * following symlinks, since the box controls every entry below it; otherwise the kernel resolves
   * the parent as given (the caller chose it). A path naming `/` or ending in `/.`/`/..` is refused: a
   * copy needs a named entry.
   * @throws BoxError `invalid_option` (field `field`) for such a path, `not_found` when the parent does
   *   not exist, `conflict` when a directory below a root is a symlink or not a directory.
   */
  top(hostPath: string, field: string, roots: readonly string[] = []): HostEntry {
    const trimmed = hostPath.replace(/(.)\/+$/, '$1');
    const name = basename(trimmed);
    if (name === '' || name === '.' || name === '..' || trimmed === '/') {
      throw new BoxError(
        `invalid copy option ${field}: '${hostPath}' must name an entry, not '/', '.' or '..'`,
        { field },
      );
    }
    const abs = resolve(trimmed);
    for (const root of roots) {
      const r = resolve(root);
      const prefix = r === '/' ? '/' : `${r}/`;
      if (!abs.startsWith(prefix) || abs === r) continue;
      const parts = abs.slice(prefix.length).split('/');
      let dirFd = this.#openTop(r, hostPath);
      let dirPath = r;
      for (const part of parts.slice(0, -1)) {
        try {
          dirFd = this.openDir({ dirFd, name: part, path: `${dirPath}/${part}` });
        } catch (error) {
          throw hostError(`${dirPath}/${part}`, error);
        }
        dirPath = `${dirPath}/${part}`;
      }
      return { dirFd, name: parts[parts.length - 1]!, path: abs };
    }
    return { dirFd: this.#openTop(dirname(trimmed), hostPath), name, path: trimmed };
  }

  /** Opens a directory by path as the kernel resolves it (a root or a parent the caller named). */
  #openTop(dir: string, hostPath: string): number {
    let fd: number;
    try {
      fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (error) {
      const code = errno(error);
      if (code === 'ENOENT' || code === 'ENOTDIR') throw notFound(`host directory '${dir}' does not exist`);
      throw hostError(hostPath, error);
    }
    this.#fds.push(fd);
    return fd;
  }

  /** `lstat` of an entry (a symlink is reported, not followed); null when it does not exist. */
  lstat(e: HostEntry): Stats | null {
    try {
      return lstatSync(at(e.dirFd, e.name));
    } catch (error) {
      if (errno(error) === 'ENOENT') return null;
      throw hostError(e.path, error);
    }
  }

  /**
   * Opens an entry that is a directory (never through a symlink); the descriptor is closed with the
   * tree. @throws the file system error (`ELOOP`/`ENOTDIR` for a symlink or a non-directory).
   */
  openDir(e: HostEntry): number {
    const fd = openSync(at(e.dirFd, e.name), DIR_FLAGS);
    this.#fds.push(fd);
    return fd;
  }

  /** Closes a directory descriptor from `openDir` before the tree ends (a finished subtree). */
  closeDir(fd: number): void {
    const i = this.#fds.indexOf(fd);
    if (i >= 0) this.#fds.splice(i, 1);
    closeSync(fd);
  }

  /** The names in an open directory, sorted. */
  names(dirFd: number): string[] {
    return readdirSync(at(dirFd, '.')).sort();
  }

  /** The entry `name` of the open directory `dirFd` (`parentPath` for messages). */
  child(dirFd: number, parentPath: string, name: string): HostEntry {
    return { dirFd, name, path: `${parentPath}/${name}` };
  }

  /**
   * Opens an entry for reading when it is a regular file, never through a symlink; the caller closes
   * the descriptor. @returns the descriptor and its stats, or null when the entry is no longer a
   * regular file (replaced meanwhile: a symlink, fifo, device or directory is not read).
   */
  openFile(e: HostEntry): { fd: number; st: Stats } | null {
    let fd: number;
    try {
      fd = openSync(at(e.dirFd, e.name), READ_FLAGS);
    } catch (error) {
      const code = errno(error);
      if (code === 'ELOOP' || code === 'ENOENT' || code === 'ENXIO') return null;
      throw hostError(e.path, error);
    }
    const st = fstatSync(fd);
    if (!st.isFile()) {
      closeSync(fd);
      return null;
    }
    return { fd, st };
  }

  /** The target text of a symlink entry. */
  readlink(e: HostEntry): string {
    return readlinkSync(at(e.dirFd, e.name));
  }

  /** Makes directory `e` (mode `mode & 0o777`, set on its descriptor) and opens it. */
  makeDir(e: HostEntry, mode: number): number {
    mkdirSync(at(e.dirFd, e.name));
    const fd = this.openDir(e);
    fchmodSync(fd, mode & 0o777);
    return fd;
  }

  /**
   * Creates regular file `e`, failing when anything exists there (`O_EXCL`: a symlink planted in
   * its place is not written through); mode `mode & 0o777` set on the descriptor. The caller closes it.
   */
  createFile(e: HostEntry, mode: number): number {
    const fd = openSync(at(e.dirFd, e.name), CREATE_FLAGS, 0o600);
    try {
      fchmodSync(fd, mode & 0o777);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return fd;
  }

  /** Makes symlink `e` with target text `target` (never resolved by the host). */
  symlink(e: HostEntry, target: string): void {
    symlinkSync(target, at(e.dirFd, e.name));
  }

  /** Unlinks non-directory `e` (a symlink itself, not its target); a missing entry is fine. */
  unlink(e: HostEntry): void {
    try {
      unlinkSync(at(e.dirFd, e.name));
    } catch (error) {
      if (errno(error) !== 'ENOENT') throw error;
    }
  }

  /** Closes every descriptor the tree opened. */
  close(): void {
    for (const fd of this.#fds.splice(0)) {
      try {
        closeSync(fd);
      } catch {}
    }
  }
}

/**
 * A host file system error of a copy as a BoxError: a symlink or non-directory met where a
 * directory was held (`ELOOP`/`ENOTDIR`/`EEXIST` from a racing writer) is a `conflict`, a missing
 * entry `not_found`, a refused access `permission_denied`.
 */
export function hostError(path: string, error: unknown): BoxError {
  if (error instanceof BoxError) return error;
  const code = errno(error);
  if (code === 'ENOENT') return notFound(`host path '${path}' does not exist`);
  if (code === 'ELOOP' || code === 'ENOTDIR' || code === 'EEXIST' || code === 'EISDIR')
    return new BoxError(`host path '${path}' changed during the copy or is not what it must be (${code})`, {
      code: 'conflict',
    });
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
    return new BoxError(`permission denied on the host: '${path}' (${code})`, { code: 'permission_denied' });
  return new BoxError(`host file operation on '${path}' failed: ${(error as Error).message}`, {
    cause: error,
    code: 'internal',
  });
}
