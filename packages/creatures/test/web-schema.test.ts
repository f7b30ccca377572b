/**
 * The front end's GraphQL types come from the server's schema: `web/src/graphql-env.ts` must be the
 * introspection `scripts/web-schema.ts` writes for the schema the server serves (a schema change without
 * regenerating fails here), and the web app must type-check against it (gql.tada types every operation of
 * `web/src/graphql.ts` from that file, so an operation or a component that no longer fits the schema fails
 * the compile).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { WEB_SCHEMA_FILE, webSchemaSource } from '../scripts/web-schema.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');

describe('web types derived from the schema', () => {
  it('web/src/graphql-env.ts is the introspection of the served schema', () => {
    assert.equal(
      readFileSync(WEB_SCHEMA_FILE, 'utf8'),
      webSchemaSource(),
      'stale: run node packages/creatures/scripts/web-schema.ts',
    );
    assert.match(readFileSync(WEB_SCHEMA_FILE, 'utf8'), /name: 'creatureChanged'/);
  });

  it('the web app type-checks against it', async () => {
    const tsc = join(ROOT, 'node_modules', '.bin', 'tsc');
    const run = promisify(execFile)(tsc, ['-p', join(ROOT, 'packages', 'creatures', 'web', 'tsconfig.json')]);
    const { stdout } = await run.catch((err: { stdout: string }) => assert.fail(err.stdout));
    assert.equal(stdout, '');
  });
});
