/**
 * Local `watchDir`: inotify watches (Node's `fs.watch`) on directories of a box opened with the confined
 * walk. Each watch is placed through `/proc/self/fd/<dir>`, so the kernel watches that directory's inode,
 * never a path the box could redirect; subdirectories (recursive) are opened one component at a time
 * with `O_NOFOLLOW` from their parent's descriptor, including directories created while watching.
 */
import { closeSync, constants, type FSWatcher, lstatSync, openSync, readdirSync, watch } from 'node:fs';
import { at } from './root.ts';
import type { FilesystemEvent, WatchHandle } from './types.ts';

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
/** Names of the temporary files `files.write` renames into place (not reported: the rename is). */
const TEMP_NAME = /^\..*\.seed-[0-9a-f]{12}$/;
/** Directories one recursive watch covers at most (each holds a descriptor and an inotify watch). */
export const MAX_WATCHED_DIRS = 4096;

/**
 * Watches the directory open as `fd` (the watch owns it from now on). Events: `create`/`remove` (an
 * entry appeared or disappeared, moves included), `write` (content or attributes changed). `onExit` is
 * called once if the watch ends on its own (the directory was removed, or the box stopped).
 */
export function watchLocal(
  fd: number,
  recursive: boolean,
  onEvent: (e: FilesystemEvent) => void,
  onExit: (error?: Error) => void,
): WatchHandle {
  const watched = new Map<string, { fd: number; watcher: FSWatcher }>();
  let stopped = false;

  const end = (error?: Error) => {
    if (stopped) return;
    stop();
    onExit(error);
  };

  const stop = () => {
    stopped = true;
    for (const { fd: dirFd, watcher } of watched.values()) {
      watcher.close();
      try {
        closeSync(dirFd);
      } catch {}
    }
    watched.clear();
  };

  const add = (dirFd: number, prefix: string) => {
    if (watched.size >= MAX_WATCHED_DIRS) {
      closeSync(dirFd);
      return;
    }
    let watcher: FSWatcher;
    try {
      watcher = watch(at(dirFd, '.'), { persistent: false, encoding: 'utf8' });
    } catch (error) {
      closeSync(dirFd);
      if (prefix === '') throw error;
      return;
    }
    watched.set(prefix, { fd: dirFd, watcher });
    watcher.on('error', (error) => {
      if (prefix === '') end(error);
    });
    watcher.on('change', (kind, filename) => {
      if (stopped || typeof filename !== 'string' || filename === '' || TEMP_NAME.test(filename)) return;
      const name = prefix === '' ? filename : `${prefix}/${filename}`;
      if (kind === 'change') {
        onEvent({ name, type: 'write' });
        return;
      }
      let isDir = false;
      let exists = true;
      try {
        isDir = lstatSync(at(dirFd, filename)).isDirectory();
      } catch {
        exists = false;
      }
      if (!exists) {
        const sub = watched.get(name);
        if (sub) {
          sub.watcher.close();
          closeSync(sub.fd);
          watched.delete(name);
        }
        onEvent({ name, type: 'remove' });
        if (prefix === '' && filename === '.') end();
        return;
      }
      onEvent({ name, type: 'create' });
      if (recursive && isDir && !watched.has(name)) addTree(dirFd, filename, name);
    });
  };

  const addTree = (parentFd: number, name: string, prefix: string) => {
    let sub: number;
    try {
      sub = openSync(at(parentFd, name), DIR_FLAGS);
    } catch {
      return; // gone, or replaced by a non-directory
    }
    add(sub, prefix);
    for (const child of safeList(sub)) {
      try {
        if (lstatSync(at(sub, child)).isDirectory()) addTree(sub, child, `${prefix}/${child}`);
      } catch {}
    }
  };

  add(fd, '');
  if (recursive) {
    for (const child of safeList(fd)) {
      try {
        if (lstatSync(at(fd, child)).isDirectory()) addTree(fd, child, child);
      } catch {}
    }
  }
  return {
    stop: async () => {
      stop();
    },
  };
}

function safeList(fd: number): string[] {
  try {
    return readdirSync(at(fd, '.'));
  } catch {
    return [];
  }
}
