/**
 * Builds one workspace package for publishing: compiles `src/**` and `bin/**` with the package's
 * `tsconfig.build.json` into `dist/` (JavaScript with `.js` import specifiers, `.d.ts` declarations and
 * source maps with the sources inlined), then copies every non-TypeScript file under `src/` (pages,
 * styles, scripts served at run time) to the same place under `dist/src/`, so that code which finds its
 * assets next to itself works from `dist/` as it does from `src/`.
 *
 * Run from the package directory (npm sets it for `npm run build -w <pkg>`, and for `prepack`):
 * `node ../../scripts/build-package.ts`. Exits non-zero when the compiler reports an error.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';

const packageDir = process.cwd();
const repoRoot = join(import.meta.dirname, '..');
const dist = join(packageDir, 'dist');

/** Every file under `dir` (recursively) whose name does not end in `.ts`. */
function assetFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...assetFiles(path));
    else if (entry.isFile() && !entry.name.endsWith('.ts')) out.push(path);
  }
  return out;
}

if (!existsSync(join(packageDir, 'tsconfig.build.json'))) {
  console.error(`build-package: no tsconfig.build.json in ${packageDir}`);
  process.exit(2);
}
rmSync(dist, { recursive: true, force: true });
const tsc = spawnSync(
  process.execPath,
  [join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
  { cwd: packageDir, stdio: 'inherit' },
);
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
// tsc copies the package.json that a bin imports (for its version) into dist/; the published package has
// one package.json, at its root, which that import reaches through the package's own `exports`.
rmSync(join(dist, 'package.json'), { force: true });
const src = join(packageDir, 'src');
for (const file of assetFiles(src)) cpSync(file, join(dist, 'src', relative(src, file)));
