/**
 * Entry point of the lifetime reaper process (`reaper.ts`): `node reaper-main.ts <homeDir>`, started by
 * `ensureReaper` under `flock -n <homeDir>/reaper.lock`. Runs passes until no box of the `homeDir` needs
 * one, then exits. One line per action is appended to `<homeDir>/reaper.log` (box ids and actions only).
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { LocalRuntime } from './local.ts';
import { runReaper } from './reaper.ts';

const homeDir = process.argv[2];
if (!homeDir) {
  process.stderr.write('usage: reaper-main <homeDir>\n');
  process.exit(2);
}
const runtime = new LocalRuntime({ homeDir });
const log = (line: string) => appendFileSync(join(homeDir, 'reaper.log'), `${line}\n`);
try {
  await runReaper(runtime.homeDir, runtime.reaperHost(), log);
} catch (error) {
  log(`${new Date().toISOString()} reaper failed: ${(error as Error).message}`);
  process.exitCode = 1;
}
