/**
 * Second process of `store-budget.test.ts`, sharing an image store directory with others.
 * - `pull <homeDir> <maxStoreBytes> <reference>`: opens the store, prints `ready`, waits for a line on
 *   stdin, pulls, then prints one JSON line: `{"ok":true}` or `{"code","message"}` of the error.
 * - `hold <homeDir> <maxStoreBytes> <bytes>`: opens the store's budget, takes `bytes`, prints `held` and
 *   waits to be killed.
 * Usage: node store-budget-child.ts pull|hold <homeDir> <maxStoreBytes> <reference|bytes>
 */
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
// internal: the store budget is driven directly
import { StoreBudget } from '../../src/images/store-budget.ts';
import { BoxError, ImageStore } from '../../src/index.ts';

const [mode, homeDir, max, what] = process.argv.slice(2) as [string, string, string, string];
const maxStoreBytes = Number(max);
if (mode === 'pull') {
  const store = new ImageStore({ homeDir, limits: { maxStoreBytes } });
  await store.list();
  console.log('ready');
  await once(process.stdin, 'data');
  process.stdin.pause();
  try {
    await store.pull(what);
    console.log(JSON.stringify({ ok: true }));
  } catch (error) {
    const code = error instanceof BoxError ? error.code : 'other';
    console.log(JSON.stringify({ code, message: (error as Error).message }));
  }
} else {
  const root = join(homeDir, 'images');
  mkdirSync(root, { recursive: true });
  new StoreBudget(root, { name: 'maxStoreBytes', max: maxStoreBytes }).take(Number(what), 0);
  console.log('held');
  setInterval(() => {}, 60_000);
}
