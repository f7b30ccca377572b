/**
 * The admin page's API client is typed by the administration API's OpenAPI document: `src/admin/web/api-types.ts`
 * is what openapi-typescript makes of the document the server serves now, and the page's TypeScript
 * (`src/admin/web/tsconfig.json`, DOM types) type-checks against it.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ADMIN_API_TYPES_FILE, adminApiTypes, adminOpenApiDocument } from '../scripts/admin-api-types.ts';

const REPO = join(import.meta.dirname, '..', '..', '..');

test('api-types.ts is generated from the OpenAPI document the admin API serves', async () => {
  const document = await adminOpenApiDocument();
  const paths = Object.keys(document.paths ?? {});
  assert.ok(paths.includes('/users/{id}'), `paths relative to {BasePath}/api: ${paths.join(' ')}`);
  assert.ok(!paths.some((p) => p.startsWith('/auth-admin')), 'no path keeps the base path');
  const expected = await adminApiTypes();
  assert.equal(
    readFileSync(ADMIN_API_TYPES_FILE, 'utf8'),
    expected,
    'src/admin/web/api-types.ts is stale: run `node scripts/admin-api-types.ts` in packages/auth',
  );
  assert.match(expected, /'\/clients\/\{clientId\}\/metadata': \{/);
});

test('the admin page type-checks against the generated API types', () => {
  const tsc = spawnSync(
    process.execPath,
    [
      join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      join(REPO, 'packages', 'auth', 'src', 'admin', 'web', 'tsconfig.json'),
    ],
    { encoding: 'utf8' },
  );
  assert.equal(tsc.status, 0, `tsc reported:\n${tsc.stdout}${tsc.stderr}`);
});
