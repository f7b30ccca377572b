/** Files the network helper keeps its state in, written so that a reader never sees half of one. */
import { renameSync, writeFileSync } from 'node:fs';

/** Writes `data` to `file` atomically (a temporary file, mode 0600, renamed over it). */
export function writeFileAtomic(file: string, data: string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, data, { mode: 0o600 });
  renameSync(tmp, file);
}
