/**
 * Builds the web front end (`web/`, Vite) into `web/dist`, which the creature server serves at `/`, when the
 * build is missing or older than any of its sources (`web/index.html`, `web/vite.config.ts`, `web/src/**`).
 * `--force` builds regardless. Run by `npm start` (prestart) and `npm test` (test:setup) of the package.
 *
 * Run: `node scripts/build-web.ts [--force]`.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The Vite project of the front end. */
export const WEB_DIR = join(import.meta.dirname, '..', 'web');
/** Its production build, served by the creature server at `/`. */
export const WEB_DIST = join(WEB_DIR, 'dist');

function newestMtimeMs(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtimeMs(join(path, entry)));
  return newest;
}

/** True when `web/dist/index.html` is missing or older than a source file of the front end. */
export function webBuildIsStale(): boolean {
  const built = join(WEB_DIST, 'index.html');
  if (!existsSync(built)) return true;
  const sources = ['index.html', 'vite.config.ts', 'src'].map((p) => join(WEB_DIR, p));
  const newestSource = Math.max(...sources.filter(existsSync).map(newestMtimeMs));
  return newestSource > statSync(built).mtimeMs;
}

/**
 * Builds `web/dist` with Vite when stale (or always with `force`); resolves with whether it built.
 * Rejects with Vite's error when the build fails.
 */
export async function buildWeb(options: { force?: boolean } = {}): Promise<boolean> {
  if (!options.force && !webBuildIsStale()) return false;
  const { build } = await import('vite');
  await build({ root: WEB_DIR, configFile: join(WEB_DIR, 'vite.config.ts'), logLevel: 'warn' });
  return true;
}

if (import.meta.main) {
  const force = process.argv.includes('--force');
  try {
    const built = await buildWeb({ force });
    console.error(
      built ? `[creatures] built the web front end into ${WEB_DIST}` : '[creatures] web build is up to date',
    );
  } catch (err) {
    console.error(`[creatures] web build failed: ${(err as Error).message}`);
    process.exit(1);
  }
}
