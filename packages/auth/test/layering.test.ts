/**
 * The package's imports point one way: the core (store, passwords, permissions, policies, tokens, the
 * authorization decision and its middleware, first-start seeding) → the protocol layers (`oauth/`,
 * `login/`, `mfa/`, `webauthn/`, `broker/`, `mail/`) → HTTP (`admin/`, the `oauthServer` plugin, the
 * health and metrics plugins) → the composition root (`server.ts`, its environment reader
 * `env-config.ts`, `index.ts`, `bin/`). Every source file is parsed with the TypeScript compiler (static
 * imports, re-exports and `import()` calls with a literal path); an import into a higher layer fails the
 * test naming the file and the specifier, type-only imports included. Inside the protocol layers the login
 * pages (`login/`) build on the OAuth layer (`oauth/`), which imports nothing from `login/`. Value imports
 * form no cycle anywhere in `src/`.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { importsIn, type SourceImport, sourceFiles } from '../../../scripts/source-imports.ts';

const SRC = join(import.meta.dirname, '..', 'src');

const PROTOCOL = new Set(['oauth', 'login', 'mfa', 'webauthn', 'broker', 'mail']);
const HTTP_FILES = new Set(['health.ts', 'metrics.ts', 'oauth-server.ts']);
const ROOT_FILES = new Set(['server.ts', 'env-config.ts', 'index.ts']);

/** Layer of a source path: 0 core, 1 protocol layers, 2 HTTP, 3 composition root. */
function layerOf(path: string): number {
  const rel = relative(SRC, path);
  if (rel.startsWith('..')) return 3; // bin/ and anything outside src/
  const top = rel.split('/')[0]!;
  if (ROOT_FILES.has(rel)) return 3;
  if (top === 'admin' || HTTP_FILES.has(rel)) return 2;
  if (PROTOCOL.has(top)) return 1;
  return 0; // top-level modules, store/, middleware/
}

/** The imports of `file` into a higher layer than its own, as `file: specifier`. */
function upward(file: string, imports: SourceImport[]): string[] {
  const layer = layerOf(file);
  return imports
    .filter(({ specifier }) => layerOf(resolve(dirname(file), specifier)) > layer)
    .map(({ specifier, typeOnly }) => `${relative(SRC, file)}: ${specifier}${typeOnly ? ' (type)' : ''}`);
}

/** The value-import graph of `files`: file → the files it loads. */
function valueGraph(files: string[]): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const targets = importsIn(file, readFileSync(file, 'utf8'))
      .filter((i) => !i.typeOnly)
      .map((i) => resolve(dirname(file), i.specifier));
    graph.set(file, targets);
  }
  return graph;
}

/** Every strongly connected component of more than one module (Tarjan), as sorted relative paths. */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const connect = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(relative(SRC, w));
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) connect(v);
  return found;
}

const upwardImports = (files: string[]) =>
  files.flatMap((file) => upward(file, importsIn(file, readFileSync(file, 'utf8'))));

describe('import direction of @seed/auth', () => {
  const all = sourceFiles(SRC);

  it('the core imports no protocol layer, HTTP module or composition root, not even a type', () => {
    const core = all.filter((f) => layerOf(f) === 0);
    assert.ok(core.length > 30, `found ${core.length} core modules`);
    assert.ok(core.some((f) => relative(SRC, f) === 'authorization.ts'));
    assert.deepEqual(upwardImports(core), []);
  });

  it('the protocol layers import nothing from admin/, the HTTP plugins or the composition root', () => {
    const protocol = all.filter((f) => layerOf(f) === 1);
    assert.ok(protocol.length > 40, `found ${protocol.length} protocol modules`);
    assert.deepEqual(upwardImports(protocol), []);
  });

  it('oauth/ imports nothing from login/ (the login pages build on the OAuth layer)', () => {
    const oauth = sourceFiles(join(SRC, 'oauth'));
    const intoLogin = oauth.flatMap((file) =>
      importsIn(file, readFileSync(file, 'utf8'))
        .filter((i) => relative(SRC, resolve(dirname(file), i.specifier)).startsWith('login/'))
        .map((i) => `${relative(SRC, file)}: ${i.specifier}`),
    );
    assert.ok(oauth.length > 30, `found ${oauth.length} oauth modules`);
    assert.deepEqual(intoLogin, []);
  });

  it('the HTTP layer imports nothing from the composition root', () => {
    assert.deepEqual(upwardImports(all.filter((f) => layerOf(f) === 2)), []);
  });

  it('no value imports form a cycle in src/', () => {
    assert.deepEqual(cycles(valueGraph(all)), []);
  });

  it('the check sees upward imports in every form, and cycles', () => {
    const probe = join(SRC, 'probe.ts');
    const forms = [
      "import { oauthServer } from './oauth/index.ts';",
      "import type { OAuthContext } from './oauth/context.ts';",
      "export { adminApi } from './admin/index.ts';",
      "const server = await import('./server.ts');",
      "import { registerLoginPage } from './login/index.ts';",
    ];
    for (const text of forms) assert.equal(upward(probe, importsIn(probe, text)).length, 1, text);
    assert.deepEqual(upward(probe, importsIn(probe, "import { x } from './store/types.ts';")), []);
    const admin = join(SRC, 'admin', 'probe.ts');
    assert.deepEqual(upward(admin, importsIn(admin, "import { x } from '../oauth/context.ts';")), []);
    const [a, b, c] = ['a.ts', 'b.ts', 'c.ts'].map((n) => join(SRC, n)) as [string, string, string];
    const ring = new Map([
      [a, [b]],
      [b, [c]],
      [c, [a]],
    ]);
    assert.deepEqual(cycles(ring), [['a.ts', 'b.ts', 'c.ts']]);
    assert.deepEqual(
      cycles(
        new Map([
          [a, [b]],
          [b, [c]],
          [c, []],
        ]),
      ),
      [],
    );
  });
});
