/**
 * Path resolution inside a running box's root for the files API, done by host root without ever
 * following a path the box controls.
 *
 * The root is the box init's `/proc/<pid>/root` (the box's own mount namespace: its overlay root and
 * its volumes). Node has no openat2(2), so every lookup is one component in a directory descriptor:
 * `/proc/self/fd/<dir>/<name>` (the magic link is that directory, as openat(2) would use it) opened with
 * `O_NOFOLLOW`. Symlinks met on the way are read and resolved here as the box sees them (an absolute
 * target starts again at the box root, `..` stops at the root: `RESOLVE_IN_ROOT`); neither a symlink nor
 * `..` is ever handed to the kernel. A box that swaps a directory for a symlink while a lookup runs makes
 * the lookup fail (`ELOOP`/`ENOTDIR`), never leave the root.
 */
import { closeSync, constants, fchownSync, fstatSync, lstatSync, openSync, readlinkSync } from 'node:fs';
import { nsIdOf, OVERFLOW_ID, type ProcIdMap } from '../../engine/idmap.ts';
import { BoxError, notFound } from '../../errors.ts';
import { mkdirAs } from './idmapped.ts';

/** Symlinks followed in one lookup before it fails, as the kernel's `MAXSYMLINKS`. */
const MAX_SYMLINKS = 40;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/** The host path naming entry `name` of the directory open as `dirFd` (one component, never a path). */
export function at(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}

/** Errno code of a failed fs call. */
export function errno(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException)?.code;
}

/**
 * User and group ids that own what the files API creates and whose permissions it checks: host ids
 * (a box with a user namespace runs as host uid `100000 + k` for box uid `k`), with the box's id
 * maps to translate them.
 */
export interface FileUser {
  /** Host uid of the box user (owner of created files). */
  uid: number;
  /** Host gid of the box user. */
  gid: number;
  /** The box's uid map (`/proc/<init>/uid_map`); absent or identity without a user namespace. */
  uidMap?: ProcIdMap;
  /** The box's gid map (`/proc/<init>/gid_map`). */
  gidMap?: ProcIdMap;
}

/**
 * A host uid or gid as the box sees it: the id under the box's map, `OVERFLOW_ID` (65534, how the
 * kernel shows it) when the id is outside the box's user namespace; unchanged without a map.
 */
export function boxId(map: ProcIdMap | undefined, hostId: number): number {
  return map ? (nsIdOf(map, hostId) ?? OVERFLOW_ID) : hostId;
}

/**
 * Checks an absolute in-box path argument.
 * @throws BoxError `invalid_option` naming `field` when it is not an absolute path without NUL bytes.
 */
export function checkBoxPath(path: unknown, field = 'path'): string {
  if (typeof path !== 'string' || !path.startsWith('/') || path.includes('\0')) {
    throw new BoxError(`invalid files option ${field}: must be an absolute path inside the box`, { field });
  }
  return path;
}

/** Splits an in-box path into its components (`.` and empty ones dropped; `..` kept for the walk). */
export function components(path: string): string[] {
  return path.split('/').filter((c) => c !== '' && c !== '.');
}

/** `dir` + `/` + `name` for in-box paths (`/` + `name` at the root). */
export function joinPath(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

/** Parent directory (open) and last component of a resolved path. */
export interface Located {
  /** Descriptor of the directory holding the entry (owned by the `BoxRoot`; do not close it). */
  dirFd: number;
  /** The entry's name in that directory (one component, never `..`). */
  name: string;
  /** The entry's path inside the box after symlinks on the way were resolved. */
  path: string;
}

/**
 * One walk context over a box root: holds the directory descriptors it opened and closes them all in
 * `close()`. Not shared between operations.
 */
export class BoxRoot {
  readonly #rootFd: number;
  readonly #fds: number[] = [];
  #links = 0;

  /**
   * @param rootPath host path of the box root (`/proc/<init>/root`); trusted, chosen by the runtime.
   * @throws BoxError `conflict` when it cannot be opened (the box stopped).
   */
  constructor(rootPath: string) {
    try {
      this.#rootFd = openSync(rootPath, constants.O_RDONLY | constants.O_DIRECTORY);
    } catch (error) {
      throw new BoxError(`the box root is not available (${errno(error) ?? (error as Error).message})`, {
        code: 'conflict',
      });
    }
    this.#fds.push(this.#rootFd);
  }

  /** Descriptor of the box root. */
  get rootFd(): number {
    return this.#rootFd;
  }

  /** Closes every descriptor this walk opened. */
  close(): void {
    for (const fd of this.#fds.splice(0)) {
      try {
        closeSync(fd);
      } catch {}
    }
  }

  /** Opens a directory entry of `dirFd` without following it; the descriptor is closed with the walk. */
  openDir(dirFd: number, name: string): number {
    const fd = openSync(at(dirFd, name), DIR_FLAGS);
    this.#fds.push(fd);
    return fd;
  }

  /**
   * Resolves `path` to its parent directory and last name, following symlinks of the directories on the
   * way inside the root; with `followLast` a symlink as the last component is followed too.
   * @param create when set, missing directories on the way are made (mode 0755, owned by this user).
   * @throws BoxError `not_found` when a directory on the way is missing, `invalid_option` (field `path`)
   *   when one is not a directory, symlinks loop, or the path names the root itself.
   */
  locate(path: string, options: { followLast?: boolean; create?: FileUser } = {}): Located {
    let todo = components(path);
    const stack: { fd: number; name: string }[] = [{ fd: this.#rootFd, name: '' }];
    const current = () => stack[stack.length - 1]!;
    const here = () =>
      `/${stack
        .slice(1)
        .map((s) => s.name)
        .join('/')}`;
    for (;;) {
      const name = todo.shift();
      if (name === undefined) {
        throw new BoxError(`invalid files option path: '${path}' names the box root, not an entry`, {
          field: 'path',
        });
      }
      if (name === '..') {
        if (stack.length > 1) stack.pop();
        if (todo.length > 0) continue;
        // The path ends in `..`: the entry is the directory reached.
        if (stack.length === 1) {
          throw new BoxError(`invalid files option path: '${path}' names the box root, not an entry`, {
            field: 'path',
          });
        }
        const self = stack.pop()!;
        return { dirFd: current().fd, name: self.name, path: joinPath(here(), self.name) };
      }
      const dir = current().fd;
      if (todo.length === 0) {
        if (options.followLast) {
          const target = this.#linkTarget(dir, name);
          if (target !== undefined) {
            todo = this.#follow(target, stack, []);
            continue;
          }
        }
        return { dirFd: dir, name, path: joinPath(here(), name) };
      }
      let fd: number;
      try {
        fd = this.openDir(dir, name);
      } catch (error) {
        const code = errno(error);
        if (code === 'ENOENT' && options.create) {
          try {
            mkdirAs(options.create, dir, name, 0o755);
            const made = this.openDir(dir, name);
            fchownSync(made, options.create.uid, options.create.gid);
            stack.push({ fd: made, name });
            continue;
          } catch (inner) {
            if (errno(inner) !== 'EEXIST') throw this.#fail(path, inner);
            continue; // made concurrently: look it up again
          }
        }
        if (code === 'ELOOP' || code === 'ENOTDIR') {
          const target = this.#linkTarget(dir, name);
          if (target !== undefined) {
            todo = this.#follow(target, stack, todo);
            continue;
          }
        }
        throw this.#fail(path, error);
      }
      stack.push({ fd, name });
    }
  }

  /** The target of `name` in `dirFd` when it is a symlink, else undefined. */
  #linkTarget(dirFd: number, name: string): string | undefined {
    let isLink = false;
    try {
      isLink = lstatSync(at(dirFd, name)).isSymbolicLink();
    } catch {
      return undefined;
    }
    if (!isLink) return undefined;
    return readlinkSync(at(dirFd, name));
  }

  /** Splices a symlink target into the remaining components (absolute: back to the root). */
  #follow(target: string, stack: { fd: number; name: string }[], rest: string[]): string[] {
    if (++this.#links > MAX_SYMLINKS) {
      throw new BoxError('invalid files option path: too many levels of symbolic links', { field: 'path' });
    }
    if (target.startsWith('/')) stack.splice(1);
    return [...components(target), ...rest];
  }

  #fail(path: string, error: unknown): BoxError {
    const code = errno(error);
    if (code === 'ENOENT') return notFound(`no such file or directory in the box: '${path}'`);
    if (code === 'ENOTDIR' || code === 'ELOOP') {
      return new BoxError(`invalid files option path: a component of '${path}' is not a directory`, {
        field: 'path',
      });
    }
    if (code === 'EACCES' || code === 'EPERM')
      return new BoxError(`permission denied in the box: '${path}'`, { code: 'permission_denied' });
    return new BoxError(`cannot resolve '${path}' in the box: ${(error as Error).message}`, {
      cause: error,
      code: 'internal',
    });
  }
}

/**
 * Checks that `user` may access an entry with stats `st` (host ids) for `want` (bits of
 * `R_OK`/`W_OK`/`X_OK`), the way the kernel's owner/group/other mode bits do for a process of that
 * uid and primary gid. Box root passes (boxes have `CAP_DAC_OVERRIDE`) when the entry's owner and
 * group are inside its user namespace, as capable_wrt_inode_uidgid() decides: a file of a host id
 * outside the box's range is checked by its mode bits for box root too. Supplementary groups and
 * ACLs are not consulted.
 * @throws BoxError `permission_denied` naming the path.
 */
export function checkAccess(
  st: { mode: number; uid: number; gid: number },
  user: FileUser,
  want: number,
  path: string,
): void {
  const mapped = (map: ProcIdMap | undefined, id: number) => !map || nsIdOf(map, id) !== undefined;
  if (boxId(user.uidMap, user.uid) === 0 && mapped(user.uidMap, st.uid) && mapped(user.gidMap, st.gid))
    return;
  const shift = st.uid === user.uid ? 6 : st.gid === user.gid ? 3 : 0;
  const bits = (st.mode >> shift) & 7;
  if ((bits & want) !== want) {
    throw new BoxError(`permission denied in the box: '${path}' for uid ${boxId(user.uidMap, user.uid)}`, {
      code: 'permission_denied',
    });
  }
}

/** `fstat` of a descriptor as the files API reports it. */
export function fstatOf(fd: number): ReturnType<typeof fstatSync> {
  return fstatSync(fd);
}
