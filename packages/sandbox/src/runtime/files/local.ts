/**
 * The local files backend: file operations on a running box done by this (host root) process through the
 * box's `/proc/<init>/root`, every path resolved with `BoxRoot` (root.ts: one component at a time, no
 * symlink or `..` handed to the kernel). New files and directories are owned by the box's user (the
 * uid/gid of its init process); reads and writes are checked against that user's mode bits.
 */
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  createReadStream,
  createWriteStream,
  fchmodSync,
  fchownSync,
  fstatSync,
  lchownSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  type Stats,
} from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { readProcIdMap } from '../../engine/idmap.ts';
import { BoxError, codeOf, conflict, notFound } from '../../errors.ts';
import { processIdentity } from '../state.ts';
import { entryOf, MAX_LIST_ENTRIES } from './entries.ts';
import { createFileAs, mkdirAs, renameAs, rmdirAs, symlinkAs, unlinkAs } from './idmapped.ts';
import { type ChunkSink, fdSink, type HostFileSource, isHostFile, pumpFd } from './pump.ts';
import { at, BoxRoot, checkAccess, errno, type FileUser, joinPath } from './root.ts';
import type { FilesBackend, JsEntryInfo, JsWriteInfo, WatchHandle, WatchRequest } from './types.ts';
import { watchLocal } from './watch.ts';

const R = 4;
const W = 2;
const X = 1;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** Which process's root the files are in; resolved per operation (the box may restart). */
export interface LocalFilesTarget {
  /**
   * Pid of the box's init (its `/proc/<pid>/root` is the box root) and its recorded identity
   * (`pid:starttime`, see `processIdentity`). @throws BoxError `conflict` when not running.
   */
  initPid(): Promise<{ pid: number; identity: string | null }>;
}

/**
 * Opens the root of the box's init. The identity is checked after the open: the same `pid:starttime`
 * then means the init existed before and after, so the descriptor is its root and not that of a host
 * process that reused the pid after the box died.
 * @throws BoxError `conflict` when the init is gone.
 */
async function openBoxRoot(target: LocalFilesTarget): Promise<{ root: BoxRoot; user: FileUser }> {
  const { pid, identity } = await target.initPid();
  const root = new BoxRoot(`/proc/${pid}/root`);
  let user: FileUser | null = null;
  try {
    user = { ...processUser(pid), uidMap: readProcIdMap(pid, 'uid'), gidMap: readProcIdMap(pid, 'gid') };
  } catch {}
  if (user === null || identity === null || processIdentity(pid) !== identity) {
    root.close();
    throw conflict('the box stopped while its files were being opened');
  }
  return { root, user };
}

/** The uid and gid of a process (its `/proc/<pid>/status` real ids). */
export function processUser(pid: number): FileUser {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const uid = /^Uid:\s+(\d+)/m.exec(status)?.[1];
  const gid = /^Gid:\s+(\d+)/m.exec(status)?.[1];
  return { uid: Number(uid ?? 0), gid: Number(gid ?? 0) };
}

function fail(path: string, error: unknown): BoxError {
  if (error instanceof BoxError) return error;
  const code = errno(error);
  if (code === 'ENOENT') return notFound(`no such file or directory in the box: '${path}'`);
  if (code === 'EEXIST' || code === 'ENOTEMPTY') return conflict(`'${path}' already exists in the box`);
  if (code === 'EISDIR') return conflict(`'${path}' is a directory`);
  if (code === 'ENOTDIR' || code === 'ELOOP')
    return new BoxError(`invalid files option path: '${path}' is not a directory`, { field: 'path' });
  if (code === 'EACCES' || code === 'EPERM' || code === 'EROFS')
    return new BoxError(`permission denied in the box: '${path}' (${code})`, { code: 'permission_denied' });
  if (code === 'ENOSPC' || code === 'EDQUOT')
    return new BoxError(`no space left in the box writing '${path}'`, { code: 'conflict' });
  return new BoxError(`file operation on '${path}' failed: ${(error as Error).message}`, {
    cause: error,
    code: codeOf(error),
  });
}

/** Files of one local box (see the module comment). */
export class LocalFiles implements FilesBackend {
  readonly #target: LocalFilesTarget;

  /** @param target resolves the box root per operation. */
  constructor(target: LocalFilesTarget) {
    this.#target = target;
  }

  /** Runs `fn` with a fresh walk over the box root and the box user; closes the walk after. */
  async #with<T>(path: string, fn: (root: BoxRoot, user: FileUser) => T | Promise<T>): Promise<T> {
    const { root, user } = await openBoxRoot(this.#target);
    try {
      return await fn(root, user);
    } catch (error) {
      throw fail(path, error);
    } finally {
      root.close();
    }
  }

  /** Opens a regular file of the box for reading as the box user; the caller owns the returned fd. */
  #openRead(root: BoxRoot, user: FileUser, path: string): number {
    const { dirFd, name } = root.locate(path, { followLast: true });
    const fd = openSync(at(dirFd, name), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = fstatSync(fd);
      if (st.isDirectory()) throw conflict(`'${path}' is a directory, not a file`);
      if (!st.isFile()) throw conflict(`'${path}' is not a regular file`);
      checkAccess(st, user, R, path);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return fd;
  }

  async readStream(path: string): Promise<Readable> {
    return this.#with(path, (root, user) =>
      createReadStream('', { fd: this.#openRead(root, user, path), highWaterMark: 64 * 1024 }),
    );
  }

  async readInto(path: string, sink: ChunkSink): Promise<void> {
    await this.#with(path, async (root, user) => {
      const fd = this.#openRead(root, user, path);
      try {
        await pumpFd(fd, sink);
      } finally {
        closeSync(fd);
      }
    });
  }

  async writeStream(path: string, source: Readable | HostFileSource, mode?: number): Promise<JsWriteInfo> {
    const { root, user } = await openBoxRoot(this.#target);
    let tmp: { dirFd: number; name: string } | null = null;
    try {
      const located = root.locate(path, { followLast: true, create: user });
      const { dirFd, name } = located;
      checkAccess(fstatSync(dirFd), user, W | X, path);
      let existing: Stats | null = null;
      try {
        existing = lstatSync(at(dirFd, name));
      } catch (error) {
        if (errno(error) !== 'ENOENT') throw error;
      }
      if (existing?.isDirectory()) throw conflict(`'${path}' is a directory, not a file`);
      if (existing && !existing.isFile()) throw conflict(`'${path}' exists and is not a regular file`);
      if (existing) checkAccess(existing, user, W, path);
      const tmpName = `.${name.slice(0, 200)}.seed-${randomBytes(6).toString('hex')}`;
      const fd = createFileAs(user, dirFd, tmpName, 0o600);
      tmp = { dirFd, name: tmpName };
      try {
        fchownSync(fd, existing?.uid ?? user.uid, existing?.gid ?? user.gid);
        fchmodSync(fd, existing ? existing.mode & 0o7777 : (mode ?? 0o644));
      } catch (error) {
        closeSync(fd);
        throw error;
      }
      if (isHostFile(source)) {
        try {
          await pumpFd(source.hostFd, fdSink(fd));
        } finally {
          closeSync(fd);
        }
      } else await pipeline(source, createWriteStream('', { fd, highWaterMark: 64 * 1024 }));
      renameAs(user, dirFd, tmpName, dirFd, name);
      tmp = null;
      return { name, path: located.path, type: 'file' };
    } catch (error) {
      // `source` is left to its owner (the REST server drains a refused upload; pipeline destroyed it on
      // a stream error already).
      throw fail(path, error);
    } finally {
      if (tmp) {
        try {
          unlinkAs(user, tmp.dirFd, tmp.name);
        } catch {}
      }
      root.close();
    }
  }

  async list(path: string, depth: number): Promise<JsEntryInfo[]> {
    return this.#with(path, (root, user) => {
      const { dirFd, name, path: resolved } = root.locate(path, { followLast: true });
      const fd = root.openDir(dirFd, name);
      const out: JsEntryInfo[] = [];
      const walk = (dir: number, dirPath: string, level: number) => {
        checkAccess(fstatSync(dir), user, R | X, dirPath);
        for (const child of readdirSync(at(dir, '.')).sort()) {
          let st: Stats;
          try {
            st = lstatSync(at(dir, child));
          } catch {
            continue; // removed meanwhile
          }
          if (out.length >= MAX_LIST_ENTRIES) {
            throw new BoxError(
              `'${path}' holds more than ${MAX_LIST_ENTRIES} entries; list with a smaller depth`,
              {
                field: 'depth',
              },
            );
          }
          const childPath = joinPath(dirPath, child);
          out.push(
            entryOf(
              st,
              childPath,
              child,
              st.isSymbolicLink() ? readlinkSync(at(dir, child)) : undefined,
              user,
            ),
          );
          if (st.isDirectory() && level < depth) {
            let sub: number;
            try {
              sub = openSync(at(dir, child), DIR_FLAGS);
            } catch {
              continue; // replaced by a non-directory meanwhile
            }
            try {
              walk(sub, childPath, level + 1);
            } finally {
              closeSync(sub);
            }
          }
        }
      };
      walk(fd, resolved, 1);
      return out;
    });
  }

  async stat(path: string): Promise<JsEntryInfo> {
    return this.#with(path, (root, user) => {
      const { dirFd, name, path: resolved } = root.locate(path);
      const st = lstatSync(at(dirFd, name));
      return entryOf(
        st,
        resolved,
        name,
        st.isSymbolicLink() ? readlinkSync(at(dirFd, name)) : undefined,
        user,
      );
    });
  }

  async makeDir(path: string): Promise<boolean> {
    return this.#with(path, (root, user) => {
      const { dirFd, name } = root.locate(path, { followLast: true, create: user });
      checkAccess(fstatSync(dirFd), user, W | X, path);
      try {
        mkdirAs(user, dirFd, name, 0o755);
      } catch (error) {
        if (errno(error) !== 'EEXIST') throw error;
        if (!lstatSync(at(dirFd, name)).isDirectory())
          throw conflict(`'${path}' exists and is not a directory`);
        return false;
      }
      const fd = root.openDir(dirFd, name);
      fchownSync(fd, user.uid, user.gid);
      return true;
    });
  }

  async remove(path: string): Promise<void> {
    return this.#with(path, (root, user) => {
      const { dirFd, name } = root.locate(path);
      checkAccess(fstatSync(dirFd), user, W | X, path);
      const st = lstatSync(at(dirFd, name));
      if (st.isDirectory()) removeTree(user, dirFd, name);
      else unlinkAs(user, dirFd, name);
    });
  }

  async rename(from: string, to: string): Promise<JsEntryInfo> {
    return this.#with(from, (root, user) => {
      const a = root.locate(from);
      const b = root.locate(to);
      checkAccess(fstatSync(a.dirFd), user, W | X, from);
      checkAccess(fstatSync(b.dirFd), user, W | X, to);
      lstatSync(at(a.dirFd, a.name)); // ENOENT → not_found naming the source
      try {
        renameAs(user, a.dirFd, a.name, b.dirFd, b.name);
      } catch (error) {
        throw fail(to, error);
      }
      const st = lstatSync(at(b.dirFd, b.name));
      return entryOf(
        st,
        b.path,
        b.name,
        st.isSymbolicLink() ? readlinkSync(at(b.dirFd, b.name)) : undefined,
        user,
      );
    });
  }

  async symlink(path: string, target: string): Promise<void> {
    return this.#with(path, (root, user) => {
      const { dirFd, name } = root.locate(path, { create: user });
      checkAccess(fstatSync(dirFd), user, W | X, path);
      try {
        unlinkAs(user, dirFd, name);
      } catch (error) {
        if (errno(error) !== 'ENOENT') throw error;
      }
      symlinkAs(user, dirFd, name, target);
      lchownSync(at(dirFd, name), user.uid, user.gid);
    });
  }

  async watch({ path, recursive, onEvent, onExit }: WatchRequest): Promise<WatchHandle> {
    return this.#with(path, (root, user) => {
      const { dirFd, name } = root.locate(path, { followLast: true });
      const fd = openSync(at(dirFd, name), DIR_FLAGS);
      try {
        checkAccess(fstatSync(fd), user, R | X, path);
      } catch (error) {
        closeSync(fd);
        throw error;
      }
      return watchLocal(fd, recursive, onEvent, onExit);
    });
  }
}

/**
 * Removes directory `name` of `parentFd` and everything under it, one component at a time: children are
 * looked up in their directory's descriptor and never followed (a symlink is unlinked, not entered).
 */
function removeTree(user: FileUser, parentFd: number, name: string): void {
  let fd: number;
  try {
    fd = openSync(at(parentFd, name), DIR_FLAGS);
  } catch (error) {
    if (errno(error) === 'ELOOP' || errno(error) === 'ENOTDIR') {
      unlinkAs(user, parentFd, name); // replaced by a link or file meanwhile
      return;
    }
    throw error;
  }
  try {
    for (const child of readdirSync(at(fd, '.'))) {
      let st: Stats;
      try {
        st = lstatSync(at(fd, child));
      } catch {
        continue;
      }
      if (st.isDirectory()) removeTree(user, fd, child);
      else unlinkAs(user, fd, child);
    }
  } finally {
    closeSync(fd);
  }
  rmdirAs(user, parentFd, name);
}
