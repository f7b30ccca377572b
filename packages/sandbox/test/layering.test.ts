/**
 * The package's imports point one way (developers' guide): the SDK facade (`index.ts`, `js-runtime.ts`,
 * `boxes/`, `cli/`) → `rest/` → `runtime/` → `engine/`, `images/`, `network/`. Every source file is parsed
 * with the TypeScript compiler (static imports, re-exports and `import()` calls with a literal path) and
 * each relative import is placed in its layer; an import into a higher layer fails the test, naming the
 * file and the specifier. The REST server's modules may name the `JsRuntime` facade as a type (the server
 * is handed one to serve); a value import would load the facade, so it fails too.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { importsIn, type SourceImport, sourceFiles } from '../../../scripts/source-imports.ts';

const SRC = join(import.meta.dirname, '..', 'src');

/** Layer of a source file: 0 engine/images/network (and leaf modules), 1 runtime, 2 rest, 3 the facade. */
function layerOf(path: string): number {
  const rel = relative(SRC, path);
  const top = rel.split('/')[0]!;
  if (top === 'engine' || top === 'images' || top === 'network') return 0;
  if (top === 'runtime') return 1;
  if (top === 'rest') return 2;
  if (top === 'boxes' || top === 'cli' || rel === 'index.ts' || rel === 'js-runtime.ts') return 3;
  return 0; // errors.ts, types.ts, constants.ts: used by every layer
}

/** The imports of `file` into a higher layer than its own, as `file: specifier`. */
function upward(file: string, imports: SourceImport[], allowTypeOnlyFacade: boolean): string[] {
  const layer = layerOf(file);
  const bad: string[] = [];
  for (const { specifier, typeOnly } of imports) {
    const target = resolve(dirname(file), specifier);
    if (layerOf(target) <= layer) continue;
    const facadeType = typeOnly && relative(SRC, target) === 'js-runtime.ts';
    if (allowTypeOnlyFacade && layer === 2 && facadeType) continue;
    bad.push(`${relative(SRC, file)}: ${specifier}${typeOnly ? ' (type)' : ''}`);
  }
  return bad;
}

/** Every upward import of `files` (see {@link upward}). */
function upwardImports(files: string[], allowTypeOnlyFacade: boolean): string[] {
  return files.flatMap((file) =>
    upward(file, importsIn(file, readFileSync(file, 'utf8')), allowTypeOnlyFacade),
  );
}

describe('import direction of @seed/sandbox', () => {
  it('no module under src/runtime imports from src/rest or the SDK facade, not even a type', () => {
    const runtime = sourceFiles(join(SRC, 'runtime'));
    assert.ok(runtime.length > 20, `found ${runtime.length} runtime modules`);
    assert.deepEqual(upwardImports(runtime, false), []);
  });

  it('engine, images and network import nothing from runtime, rest or the facade', () => {
    const lower = ['engine', 'images', 'network'].flatMap((dir) => sourceFiles(join(SRC, dir)));
    assert.deepEqual(upwardImports(lower, false), []);
  });

  it('rest imports from the facade only the JsRuntime type its server is handed', () => {
    assert.deepEqual(upwardImports(sourceFiles(join(SRC, 'rest')), true), []);
  });

  it('the check sees a runtime module importing, re-exporting or lazily loading rest, and types too', () => {
    const probe = join(SRC, 'runtime', 'probe.ts');
    const forms = [
      "import { RestRuntime } from '../rest/client.ts';",
      "import type { RestBox } from '../rest/client.ts';",
      "export { RestBox } from '../rest/client.ts';",
      "const rest = await import('../rest/client.ts');",
      "import { JsRuntime } from '../js-runtime.ts';",
    ];
    for (const text of forms) {
      assert.equal(upward(probe, importsIn(probe, text), false).length, 1, text);
    }
    assert.deepEqual(upward(probe, importsIn(probe, "import { x } from '../engine/types.ts';"), false), []);
  });
});
