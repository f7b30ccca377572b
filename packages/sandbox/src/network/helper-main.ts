/**
 * Entry point of the network helper process (`helper.ts`): `node helper-main.ts <dir>`, run by
 * `ensureHelper` (`helper-client.ts`) in a restart loop under `flock -n <dir>/lock`. Writes its
 * `pid:starttime` to `<dir>/pid`, serves until it has had no box for a while, then exits 0 (which ends
 * the loop). Log lines (box ids and events, never secret values) go to stdout, appended to `<dir>/log`.
 */
import { readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processIdentity } from '../engine/proc-stat.ts';
import { NetworkHelper } from './helper.ts';

const dir = process.argv[2];
if (!dir) {
  process.stderr.write('usage: helper-main <dir>\n');
  process.exit(2);
}
const log = (line: string) => process.stdout.write(`${new Date().toISOString()} ${line}\n`);
const helper = new NetworkHelper(dir, log);
await helper.start();
const me = processIdentity(process.pid) ?? `${process.pid}:0`;
writeFileSync(join(dir, 'pid'), me);
log(`network helper ${process.pid} serving ${dir}`);
await helper.stopped;
rmSync(join(dir, 'pid'), { force: true });
// A box registered while the helper was stopping: exit non-zero, so the loop runs a helper again.
const left = readdirSync(join(dir, 'boxes')).some((name) => name.endsWith('.json'));
log(left ? 'stopped with boxes left: restarting' : 'no box left: exiting');
process.exit(left ? 1 : 0);
