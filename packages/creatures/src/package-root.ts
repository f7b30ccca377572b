/**
 * The directory of this package (the one holding its `package.json`, `data/` and `web/dist/`), found from
 * this module's own location so that it is the same whether the code runs from `src/` in the repository
 * or from `dist/src/` in an installed package.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';

function findPackageRoot(start: string): string {
  let dir = start;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${start}`);
    dir = parent;
  }
  return dir;
}

/** Absolute path of the `@seed/creatures` package directory. */
export const PACKAGE_ROOT: string = findPackageRoot(import.meta.dirname);
