/**
 * The output and errors of the gVisor files helper (gvisor-script.ts) as the files API reports them:
 * batches of `stat` lines with hex-encoded paths and link targets become `JsEntryInfo`s, the helper's
 * refusal codes become `BoxError`s.
 */
import { BoxError, conflict, notFound } from '../../errors.ts';
import { permissionString } from './entries.ts';
import { components } from './root.ts';
import type { FileType, JsEntryInfo } from './types.ts';

/** A finished helper: its exit code, whole stdout and stderr. */
export interface Done {
  /** Exit code (3: a refusal, 4: an entry vanished mid-batch, 255: the helper could not start). */
  code: number;
  stdout: Buffer;
  stderr: string;
}

/** Bytes of a hex line (`od` output with spaces removed). */
export function fromHex(line: string | undefined): Buffer {
  return Buffer.from(line ?? '', 'hex');
}

/** The entry type of a raw `st_mode`. */
export function typeOf(mode: number): FileType {
  const fmt = mode & 0o170000;
  return fmt === 0o100000 ? 'file' : fmt === 0o040000 ? 'dir' : fmt === 0o120000 ? 'symlink' : 'other';
}

/** Entries of the batches in `lines` (see gvisor-script.ts); undefined when a batch is malformed. */
export function parseBatches(lines: string[]): JsEntryInfo[] | undefined {
  const out: JsEntryInfo[] = [];
  let i = 0;
  while (i < lines.length && lines[i] !== '') {
    const stats: string[] = [];
    while (i < lines.length && lines[i] !== '@@') stats.push(lines[i++]!);
    const paths = fromHex(lines[i + 1])
      .toString('utf8')
      .split('\0')
      .slice(0, -1);
    const targets = fromHex(lines[i + 3])
      .toString('utf8')
      .split('\0')
      .slice(0, -1);
    if (lines[i + 2] !== '@@' || lines[i + 4] !== '@@@') return undefined;
    if (paths.length !== stats.length || targets.length !== stats.length) return undefined;
    i += 5;
    for (const [k, line] of stats.entries()) {
      const [hexMode, size, uid, gid, mtime] = line.split(' ');
      const mode = Number.parseInt(hexMode ?? '', 16);
      const path = paths[k]!;
      const type = typeOf(mode);
      const target = targets[k]!.replace(/\n$/, '');
      out.push({
        name: path.slice(path.lastIndexOf('/') + 1),
        path,
        type,
        size: Number(size),
        mode: mode & 0o7777,
        permissions: permissionString(mode),
        uid: Number(uid),
        gid: Number(gid),
        modifiedTime: new Date(Number(mtime) * 1000),
        ...(type === 'symlink' ? { symlinkTarget: target } : {}),
      });
    }
  }
  return out;
}

/** `dir` + `/` + `name` for a resolved in-box directory. */
export function under(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

/** The refusal of an operation on `path` from the script's exit code and stderr. */
export function refusal(path: string, done: Omit<Done, 'stdout'>): BoxError {
  const code = /seed-files: (\w+)/.exec(done.stderr)?.[1];
  if (done.code === 3) {
    if (code === 'ENOENT') return notFound(`no such file or directory in the box: '${path}'`);
    if (code === 'ENOTDIR')
      return new BoxError(`invalid files option path: a component of '${path}' is not a directory`, {
        field: 'path',
      });
    if (code === 'EISDIR') return conflict(`'${path}' is a directory`);
    if (code === 'EEXIST') return conflict(`'${path}' already exists in the box`);
    if (code === 'NOTFILE') return conflict(`'${path}' is not a regular file`);
    if (code === 'EACCES')
      return new BoxError(`permission denied in the box: '${path}'`, { code: 'permission_denied' });
  }
  // 255: runsc could not start the helper (the box was started without the host's static busybox).
  if (done.code === 255) {
    return new BoxError(
      `files: the gvisor isolation tier moves files with the host static busybox (/bin/busybox from busybox-static) inside the box, which could not be started (${done.stderr.trim()})`,
      { code: 'unsupported' },
    );
  }
  return new BoxError(
    `file operation on '${path}' failed in the box: ${done.stderr.trim() || `exit ${done.code}`}`,
    { code: 'internal' },
  );
}

/**
 * Refuses a path naming the box root (as the local backend does).
 * @throws BoxError `invalid_option` (field `path`).
 */
export function checkEntryPath(path: string): void {
  if (components(path).filter((c) => c !== '..').length === 0) {
    throw new BoxError(`invalid files option path: '${path}' names the box root, not an entry`, {
      field: 'path',
    });
  }
}

/** Entries in the order the local backend lists them: each directory's names sorted, depth first. */
export function sortTree(entries: JsEntryInfo[]): JsEntryInfo[] {
  const key = (e: JsEntryInfo) => e.path.split('/');
  return entries.sort((a, b) => {
    const x = key(a);
    const y = key(b);
    for (let i = 0; i < Math.min(x.length, y.length); i++) {
      if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
    }
    return x.length - y.length;
  });
}
