/**
 * The package's imports point one way: the core (schema and resolvers, the stores, the error codes, the
 * operation checks, the cost model, the limits, query plans) → the protocols (the GraphQL engine with its
 * HTTP parts under `http/`, the request listener `http/router.ts` among them, SSE, multipart, incremental
 * delivery, WebSocket, the explorer) → the composition root (`server.ts`, `config.ts`, `index.ts`). Every
 * source file is parsed with the TypeScript compiler; each relative value import (type-only imports load
 * nothing) is placed in its layer, an import into a higher layer fails the test naming the file and the
 * specifier, and the value imports must form no cycle. The composition root only wires: `server.ts`
 * handles no request itself (it names no request or response type of `node:http`). The store layer
 * (`store*.ts`) loads no `graphql`, directly or through the modules it imports: it refuses writes with
 * `CreatureStoreError`, which the resolvers turn into GraphQL errors.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { importsIn } from '../../../scripts/source-imports.ts';

const SRC = join(import.meta.dirname, '..', 'src');

const PROTOCOLS = new Set([
  'engine.ts',
  'engine-fast.ts',
  'incremental.ts',
  'subscriptions.ts',
  'websocket.ts',
  'explorer.ts',
]);
/** An `import`/`export … from`/`import()` of the `graphql` package or one of its subpaths. */
const GRAPHQL_IMPORT = /\b(?:from|import)\s*\(?\s*['"]graphql(?:\/[^'"]*)?['"]/;
const ROOT = new Set(['server.ts', 'config.ts', 'index.ts']);

/** Layer of a source file: 0 core, 1 protocols (with `http/`), 2 composition root. */
function layerOf(rel: string): number {
  if (ROOT.has(rel)) return 2;
  if (PROTOCOLS.has(rel) || rel.startsWith('http/')) return 1;
  return 0;
}

/** The relative value imports of a module (static imports and re-exports that are not type-only). */
function valueImports(path: string): string[] {
  return importsIn(path, readFileSync(path, 'utf8'))
    .filter((i) => !i.typeOnly && !i.dynamic)
    .map((i) => i.specifier);
}

const files = readdirSync(SRC, { recursive: true })
  .map(String)
  .filter((f) => f.endsWith('.ts'));
const graph = new Map(
  files.map((rel) => [
    rel,
    valueImports(join(SRC, rel)).map((s) => ({
      specifier: s,
      target: relative(SRC, resolve(dirname(join(SRC, rel)), s)),
    })),
  ]),
);

describe('layering of @seed/creatures', () => {
  it('no module imports a module of a higher layer', () => {
    const wrong: string[] = [];
    for (const [rel, imports] of graph) {
      for (const { specifier, target } of imports) {
        if (layerOf(target) > layerOf(rel)) wrong.push(`${rel} imports ${specifier}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  it('the value imports form no cycle', () => {
    const state = new Map<string, 'open' | 'done'>();
    const cycles: string[] = [];
    const walk = (rel: string, path: string[]): void => {
      state.set(rel, 'open');
      for (const { target } of graph.get(rel) ?? []) {
        if (!graph.has(target)) continue;
        if (state.get(target) === 'open') cycles.push([...path, rel, target].join(' → '));
        else if (!state.has(target)) walk(target, [...path, rel]);
      }
      state.set(rel, 'done');
    };
    for (const rel of graph.keys()) if (!state.has(rel)) walk(rel, []);
    assert.deepEqual(cycles, []);
  });

  it('the store layer loads no GraphQL: it throws CreatureStoreError, not GraphQLError', () => {
    const stores = [...graph.keys()].filter((rel) => /^store[-.]/.test(rel));
    assert.ok(stores.includes('store-rules.ts') && stores.includes('store-postgres.ts'));
    const wrong: string[] = [];
    for (const store of stores) {
      const seen = new Set<string>();
      const walk = (rel: string): void => {
        if (seen.has(rel)) return;
        seen.add(rel);
        if (GRAPHQL_IMPORT.test(readFileSync(join(SRC, rel), 'utf8'))) wrong.push(`${store}: ${rel}`);
        for (const { target } of graph.get(rel) ?? []) if (graph.has(target)) walk(target);
      };
      walk(store);
    }
    assert.deepEqual(wrong, []);
  });

  it('the composition root handles no request itself', () => {
    const source = readFileSync(join(SRC, 'server.ts'), 'utf8');
    assert.deepEqual(source.match(/\b(IncomingMessage|ServerResponse)\b(?!:)/g) ?? [], []);
  });

  it('the layers are not empty (the file lists above still name real files)', () => {
    for (const rel of [...PROTOCOLS, ...ROOT]) assert.ok(graph.has(rel), `${rel} is not in src/`);
  });
});
