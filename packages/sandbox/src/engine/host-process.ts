/**
 * Small host-side helpers every engine (crun, gVisor, rootless) uses around the processes it starts:
 * waiting, telling a live process from a zombie, writing its generated scripts, and reading a command's
 * pipes without deadlock.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { PassThrough, type Readable } from 'node:stream';

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** True when `pid` exists and is not a zombie (state `Z` or `X` in `/proc/<pid>/stat`). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/**
 * Writes an executable script (mode 0755) unless `path` already holds exactly `content`. The file is
 * written beside it and renamed into place, so concurrent engines never run a half-written script.
 * @throws the file system error.
 */
export function writeIfChanged(path: string, content: string): void {
  let current: string | undefined;
  try {
    current = readFileSync(path, 'utf8');
  } catch {}
  if (current === content) return;
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, content, { mode: 0o755 });
  chmodSync(tmp, 0o755);
  renameSync(tmp, path);
}

/** Bytes an unread output stream may buffer before the command is throttled by back-pressure. */
export const EXEC_OUTPUT_BUFFER_BYTES = 64 * 1024 * 1024;

/**
 * Reads a command's pipe eagerly into a PassThrough, so a caller reading only stdout never deadlocks a
 * command that floods stderr (and vice versa); back-pressure applies only past
 * `EXEC_OUTPUT_BUFFER_BYTES` unread bytes.
 */
export function drain(source: Readable): Readable {
  const out = new PassThrough({ highWaterMark: 64 * 1024 });
  source.on('data', (chunk: Buffer) => {
    out.write(chunk);
    if (out.writableLength + out.readableLength > EXEC_OUTPUT_BUFFER_BYTES) {
      source.pause();
      out.once('drain', () => source.resume());
    }
  });
  source.on('end', () => out.end());
  source.on('error', (err) => out.destroy(err));
  return out;
}
