/**
 * Small JSON state files of the shared service (keys, ownership, preview URLs): read whole, written
 * atomically (a temporary file in the same directory, fsync, rename over the old one), mode 0600, so that
 * a crash leaves the old or the new content and never a torn file.
 */
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';

/**
 * Writes `value` as JSON to `path` atomically (see the module comment); creates the directory (0700).
 * @throws the `fs` error when the directory or file cannot be written.
 */
export function writeJsonAtomic(path: string, value: unknown): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  const fd = openSync(temporary, 'wx', 0o600);
  try {
    writeSync(fd, `${JSON.stringify(value, null, 1)}\n`);
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw error;
  }
  closeSync(fd);
  renameSync(temporary, path);
}

/**
 * The parsed JSON of `path`, or `fallback` when the file does not exist.
 * @throws Error naming the file when it exists but is not JSON.
 */
export function readJson<T>(path: string, fallback: T): T {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return fallback;
    throw error;
  }
  try {
    return JSON.parse(text) as T;
  } catch (error) {
    throw new Error(`${path} is not valid JSON: ${(error as Error).message}`);
  }
}

/** A file's change stamp (`mtimeMs:size`), or `''` when it does not exist; tells a reader to reload. */
export function stampOf(path: string): string {
  try {
    const stat = statSync(path);
    return `${stat.mtimeMs}:${stat.size}:${stat.ino}`;
  } catch {
    return '';
  }
}
