/**
 * Host paths bound into boxes (`hostPath` volumes). A host directory shared with a box is writable by
 * the box, so any of its entries may be a symlink a box planted (pointing at the host's `/etc`, say)
 * or may become one between a check and the mount. The engine therefore refuses a path with a symlink
 * in any component, and binds the very object it checked: it holds an `O_PATH` descriptor of it, which
 * the box supervisor inherits and bind-mounts (`mount --no-canonicalize --rbind /proc/self/fd/<n>`,
 * resolved by the kernel to the descriptor's file, never to a path) onto a staging point in the box
 * directory; the OCI runtime binds that staging point into the box.
 */
import { closeSync, constants, fstatSync, openSync, readlinkSync } from 'node:fs';
import { normalize } from 'node:path';
import { BoxError } from '../errors.ts';

/** `O_PATH` (Linux asm-generic value, x86_64 and arm64). */
const O_PATH = 0o10000000;

/** A host path opened for binding; `close()` once the runtime has mounted it. */
export interface OpenedHostPath {
  /** The path as checked (normalized, absolute, no symlinks). */
  path: string;
  /** The `O_PATH` descriptor of the checked object (valid until `close()`). */
  fd: number;
  /** True for a directory, false for a regular file. */
  isDirectory: boolean;
  /** Closes the descriptor (idempotent). */
  close(): void;
}

/**
 * Opens `hostPath` component by component from `/`, refusing symlinks anywhere on the path.
 * @param hostPath absolute host path of a directory or a regular file.
 * @param field option path for errors (e.g. `mounts[0].hostPath`).
 * @returns the opened path (`source` for the mount).
 * @throws BoxError naming `field` when the path is relative, contains `..`, does not exist, passes
 *   through a symlink (the message gives the symlink and its target) or is neither a directory nor a
 *   regular file.
 */
export function openHostPath(hostPath: string, field: string): OpenedHostPath {
  if (!hostPath.startsWith('/'))
    throw new BoxError(`${field}: '${hostPath}' must be absolute`, { field, code: 'invalid_option' });
  if (hostPath.split('/').includes('..'))
    throw new BoxError(`${field}: '${hostPath}' must not contain '..' components`, {
      field,
      code: 'invalid_option',
    });
  const path = normalize(hostPath).replace(/(.)\/+$/, '$1');
  let fd = openSync('/', O_PATH | constants.O_DIRECTORY);
  let walked = '';
  let isDirectory = false;
  try {
    for (const name of path.split('/').filter(Boolean)) {
      walked += `/${name}`;
      let next: number;
      try {
        next = openSync(`/proc/self/fd/${fd}/${name}`, O_PATH | constants.O_NOFOLLOW);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        throw new BoxError(
          code === 'ENOENT'
            ? `${field}: '${hostPath}' does not exist ('${walked}' is missing)`
            : `${field}: '${hostPath}' cannot be opened at '${walked}' (${code})`,
          { field, code: code === 'ENOENT' ? 'not_found' : 'invalid_option' },
        );
      }
      closeSync(fd);
      fd = next;
      const st = fstatSync(fd);
      if (st.isSymbolicLink()) {
        let target = '?';
        try {
          target = readlinkSync(walked);
        } catch {}
        throw new BoxError(
          `${field}: '${hostPath}' passes through the symlink '${walked}' (→ '${target}'); host paths must not contain symlinks (give the resolved path)`,
          { field, code: 'invalid_option' },
        );
      }
    }
    isDirectory = fstatSync(fd).isDirectory();
    if (!isDirectory && !fstatSync(fd).isFile())
      throw new BoxError(`${field}: '${hostPath}' must be a directory or a regular file`, {
        field,
        code: 'invalid_option',
      });
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  let open = true;
  return {
    path,
    fd,
    isDirectory,
    close() {
      if (open) closeSync(fd);
      open = false;
    },
  };
}

/**
 * Opens the host path of every mount of a box (`openHostPath`, field `mounts[i].hostPath`), checks
 * each opened object with `check` (when given), runs `use` with them (`opened[i]` is the host object
 * of `mounts[i]`), and closes them all once it has settled, whether it resolved or threw.
 * @throws BoxError naming `mounts[i].hostPath` when a path cannot be opened; whatever `check` or
 *   `use` throws.
 */
export async function withOpenedHostPaths<M extends { hostPath: string }, T>(
  mounts: readonly M[],
  use: (opened: OpenedHostPath[]) => Promise<T>,
  check?: (o: OpenedHostPath, m: M, i: number) => void,
): Promise<T> {
  const opened: OpenedHostPath[] = [];
  try {
    for (const [i, m] of mounts.entries()) {
      const o = openHostPath(m.hostPath, `mounts[${i}].hostPath`);
      opened.push(o);
      check?.(o, m, i);
    }
    return await use(opened);
  } finally {
    for (const o of opened) o.close();
  }
}
