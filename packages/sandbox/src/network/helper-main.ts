/**
 * Entry point of the network helper process (`helper.ts`): `node helper-main.ts <dir>`, run by
 * `ensureHelper` (`helper-client.ts`) in a restart loop under `flock -n <dir>/lock`. Writes its
 * `pid:starttime` to `<dir>/pid`, serves until it has had no box for a while, then removes `<dir>` and
 * exits 0 (which ends the loop). Log lines (box ids and events, never secret values) go to stdout, appended to `<dir>/log`.
 */
import { readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processIdentity } from '../engine/proc-stat.ts';
import { NetworkHelper } from './helper.ts';

/** Size past which the helper's log is emptied when a helper starts, bytes. */
const MAX_LOG_BYTES = 1024 * 1024;

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: helper-main <dir>\n');
  process.exit(2);
}
const log = (line: string) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);
// The log (appended to by the restart loop) is cut when it has grown past MAX_LOG_BYTES.
try {
  if (statSync(join(dir, 'log')).size > MAX_LOG_BYTES) truncateSync(join(dir, 'log'), 0);
} catch {}
const helper = new NetworkHelper(dir, log);
await helper.start();
const me = processIdentity(process.pid) ?? `${process.pid}:0`;
writeFileSync(join(dir, 'pid'), me);
log(`network helper ${process.pid} serving ${dir}`);
await helper.stopped;
rmSync(join(dir, 'pid'), { force: true });
// A box registered while the helper was stopping: exit non-zero, so the loop runs a helper again.
const left = readdirSync(join(dir, 'boxes')).some((name) => name.endsWith('.json'));
if (left) {
  log('stopped with boxes left: restarting');
  process.exit(1);
}
// Nothing left to serve: the directory goes (a starter makes it again).
rmSync(dir, { recursive: true, force: true });
process.exit(0);
