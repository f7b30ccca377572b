/**
 * Tests reach the package the way its users do: through the modules package.json `exports` names for
 * the source condition (`src/index.ts` and the `./server` entry, `src/rest/server.ts`). A test that
 * checks an internal unit on purpose imports that module directly, with a line comment starting
 * `// internal:` right above the import saying why. Every module under test/ is parsed with the
 * TypeScript compiler; an import or re-export of another src module without that marker fails, and so
 * does a marked one of a name the entry re-exports from that same module (the entry has it).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { sourceFiles } from '../../../scripts/source-imports.ts';

const PACKAGE = join(import.meta.dirname, '..');
const SRC = join(PACKAGE, 'src');
const TESTS = import.meta.dirname;
const MARKER = /^\/\/ internal: \S/;

/** The modules package.json `exports` serves under the `seed-source` condition, as absolute paths. */
function publicModules(): Set<string> {
  const pkg = JSON.parse(readFileSync(join(PACKAGE, 'package.json'), 'utf8')) as {
    exports: Record<string, string | Record<string, string>>;
  };
  const found = new Set<string>();
  for (const target of Object.values(pkg.exports)) {
    if (typeof target === 'object' && target['seed-source'])
      found.add(resolve(PACKAGE, target['seed-source']));
  }
  return found;
}

/** What the entry re-exports, by source module: the names, or `'*'` for `export * from`. */
function entryReExports(entry: string): Map<string, Set<string> | '*'> {
  const source = ts.createSourceFile(entry, readFileSync(entry, 'utf8'), ts.ScriptTarget.Latest, true);
  const found = new Map<string, Set<string> | '*'>();
  for (const statement of source.statements) {
    if (!ts.isExportDeclaration(statement) || !statement.moduleSpecifier) continue;
    if (!ts.isStringLiteral(statement.moduleSpecifier)) continue;
    const module = resolve(dirname(entry), statement.moduleSpecifier.text);
    const clause = statement.exportClause;
    if (!clause || !ts.isNamedExports(clause)) {
      found.set(module, '*');
      continue;
    }
    const names = found.get(module);
    const set = names instanceof Set ? names : new Set<string>();
    for (const element of clause.elements) set.add((element.propertyName ?? element.name).text);
    if (names !== '*') found.set(module, set);
  }
  return found;
}

/** The rules' inputs: the public modules and what the main entry re-exports. */
interface Surface {
  publicModules: Set<string>;
  reExports: Map<string, Set<string> | '*'>;
}

/**
 * The imports of the test module `file` (text `text`) that break the rules, as `file: specifier (why)`.
 * Only imports resolving into src/ are judged; bare and test-local specifiers pass.
 */
function violations(file: string, text: string, surface: Surface): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const bad: string[] = [];
  for (const statement of source.statements) {
    const isImport = ts.isImportDeclaration(statement);
    if (!isImport && !ts.isExportDeclaration(statement)) continue;
    const specifier = statement.moduleSpecifier;
    if (!specifier || !ts.isStringLiteral(specifier) || !specifier.text.startsWith('.')) continue;
    const target = resolve(dirname(file), specifier.text);
    const leading = ts.getLeadingCommentRanges(text, statement.getFullStart()) ?? [];
    const last = leading.at(-1);
    const marked = last !== undefined && MARKER.test(text.slice(last.pos, last.end));
    const where = `${relative(TESTS, file)}: ${specifier.text}`;
    if (!target.startsWith(`${SRC}/`)) {
      if (marked) bad.push(`${where} (marked internal but not a src module)`);
      continue;
    }
    if (surface.publicModules.has(target)) {
      if (marked) bad.push(`${where} (marked internal but public)`);
      continue;
    }
    if (!marked) {
      bad.push(`${where} (internal module without a "// internal: why" line above)`);
      continue;
    }
    const reExported = surface.reExports.get(target);
    if (reExported === undefined) continue;
    const names: string[] = [];
    if (isImport) {
      const clause = statement.importClause;
      const bindings = clause?.namedBindings;
      if (clause?.name || (bindings && ts.isNamespaceImport(bindings))) names.push('*');
      if (bindings && ts.isNamedImports(bindings)) {
        for (const e of bindings.elements) names.push((e.propertyName ?? e.name).text);
      }
    } else {
      const clause = statement.exportClause;
      if (clause && ts.isNamedExports(clause)) {
        for (const e of clause.elements) names.push((e.propertyName ?? e.name).text);
      } else names.push('*');
    }
    const entryHas = names.filter((name) => reExported === '*' || reExported.has(name));
    if (entryHas.length > 0) bad.push(`${where} (${entryHas.join(', ')} from the package entry)`);
  }
  return bad;
}

const surface: Surface = {
  publicModules: publicModules(),
  reExports: entryReExports(join(SRC, 'index.ts')),
};

describe('sandbox tests import the public entries', () => {
  it('package.json exports the entry and the REST server for the source condition', () => {
    assert.deepEqual([...surface.publicModules].map((p) => relative(SRC, p)).sort(), [
      'index.ts',
      'rest/server.ts',
    ]);
  });

  it('every test module imports src internals only with an "// internal:" reason', () => {
    const files = sourceFiles(TESTS);
    assert.ok(files.length > 80, `found ${files.length} test modules`);
    const found = files.flatMap((file) => violations(file, readFileSync(file, 'utf8'), surface));
    assert.deepEqual(found, []);
  });

  it('the check sees unmarked internals, public names through internal paths and stray markers', () => {
    const probe = join(TESTS, 'probe.test.ts');
    const refused = [
      "import { JsRuntime } from '../src/js-runtime.ts';",
      "import type { JsBox } from '../src/runtime/box.ts';",
      "export { StateDb } from '../src/runtime/state.ts';",
      "// internal: reason\nimport { BoxError, ERROR_CODES } from '../src/errors.ts';",
      "// internal: reason\nimport { DEFAULT_CPUS } from '../src/constants.ts';",
      "// internal: reason\nimport { SimpleBox } from '../src/index.ts';",
      "// internal: reason\nimport { run } from './runtime-helpers.ts';",
      "// a comment\nimport { StateDb } from '../src/runtime/state.ts';",
    ];
    for (const text of refused) assert.equal(violations(probe, text, surface).length, 1, text);
    const accepted = [
      "import { JsRuntime, type JsBox, BoxError } from '../src/index.ts';",
      "import { RestServer } from '../src/rest/server.ts';",
      "// internal: the state database is read directly\nimport { StateDb } from '../src/runtime/state.ts';",
      "// internal: reason\nimport { ERROR_CODES } from '../src/errors.ts';",
      "import { run } from './runtime-helpers.ts';",
    ];
    for (const text of accepted) assert.deepEqual(violations(probe, text, surface), [], text);
  });
});
