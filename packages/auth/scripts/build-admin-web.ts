/**
 * Builds the admin web page (`src/admin/web/`: `index.html`, `app.css` and the TypeScript modules, with
 * openapi-fetch bundled) with Vite into `src/admin/web/dist/` (`index.html`, `app.js`, `app.css`), which
 * `src/admin/page.ts` serves at `{BasePath}/`, when the build is missing or older than any of its sources.
 * `--force` builds regardless. Run by `npm start` (prestart) and `npm test` (test:setup) of the package, and
 * by `npm run build` before the package is compiled (the build is copied into `dist/src/admin/web/dist/`).
 *
 * Run: `node scripts/build-admin-web.ts [--force]`.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The sources of the admin page. */
export const ADMIN_WEB_DIR = join(import.meta.dirname, '..', 'src', 'admin', 'web');
/** Its production build, served by the admin page plugin. */
export const ADMIN_WEB_DIST = join(ADMIN_WEB_DIR, 'dist');
/** The files of the build that the server reads. */
export const ADMIN_WEB_FILES = ['index.html', 'app.js', 'app.css'] as const;

/** The store's value lists the page bundles (`src/store/constants.ts`, which imports nothing). */
const SHARED_CONSTANTS = join(ADMIN_WEB_DIR, '..', '..', 'store', 'constants.ts');

/**
 * The newest modification time (ms) of the page's sources: every file of `src/admin/web/` but `dist/`,
 * and the shared constants module.
 */
function newestSourceMtimeMs(): number {
  let newest = statSync(SHARED_CONSTANTS).mtimeMs;
  for (const entry of readdirSync(ADMIN_WEB_DIR, { withFileTypes: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(join(ADMIN_WEB_DIR, entry.name)).mtimeMs);
  }
  return newest;
}

/** True when a file of the build is missing or older than a source of the page. */
export function adminWebBuildIsStale(): boolean {
  const built = ADMIN_WEB_FILES.map((name) => join(ADMIN_WEB_DIST, name));
  if (!built.every(existsSync)) return true;
  const oldest = Math.min(...built.map((path) => statSync(path).mtimeMs));
  return newestSourceMtimeMs() > oldest;
}

/**
 * Builds `src/admin/web/dist` with Vite when stale (or always with `force`); resolves with whether it built.
 * Rejects with Vite's error when the build fails.
 */
export async function buildAdminWeb(options: { force?: boolean } = {}): Promise<boolean> {
  if (!options.force && !adminWebBuildIsStale()) return false;
  const { build } = await import('vite');
  await build({
    root: ADMIN_WEB_DIR,
    configFile: false,
    envDir: false,
    logLevel: 'warn',
    // relative URLs: the page is served at `{BasePath}/`, whatever the base path
    base: './',
    build: {
      outDir: ADMIN_WEB_DIST,
      emptyOutDir: true,
      target: 'es2022',
      // the page's Content-Security-Policy allows scripts from 'self' only: no inline polyfill
      modulePreload: { polyfill: false },
      sourcemap: false,
      rollupOptions: {
        output: {
          entryFileNames: 'app.js',
          chunkFileNames: '[name].js',
          // the stylesheet linked from index.html is the page's one: app.css
          assetFileNames: (asset) =>
            asset.names.some((n) => n.endsWith('.css')) ? 'app.css' : '[name][extname]',
        },
      },
    },
  });
  return true;
}

if (import.meta.main) {
  const force = process.argv.includes('--force');
  try {
    const built = await buildAdminWeb({ force });
    console.error(
      built ? `[auth] built the admin page into ${ADMIN_WEB_DIST}` : '[auth] admin page build is up to date',
    );
  } catch (err) {
    console.error(`[auth] admin page build failed: ${(err as Error).message}`);
    process.exit(1);
  }
}
