import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { serverAudits } from 'graphql-http';
import { type Running, start } from './helpers.ts';

let s: Running;
before(async () => {
  s = await start();
});
after(() => s.server.close());

test('graphql-http serverAudits: all 61 audits pass, MUST, SHOULD and MAY (GraphQL over HTTP spec)', async () => {
  const results = await Promise.all(serverAudits({ url: s.endpoint }).map((audit) => audit.fn()));
  const failed = results.filter((r) => r.status !== 'ok');
  const required = results.filter((r) => /\b(MUST|SHOULD)\b/.test(r.name) && !/\bMAY\b/.test(r.name));
  console.log(
    `graphql-http audits: ${results.length - failed.length}/${results.length} passed ` +
      `(${required.filter((r) => r.status === 'ok').length}/${required.length} MUST+SHOULD)`,
  );
  for (const f of failed) console.log(`  FAILED ${f.id} ${f.name}: ${'reason' in f ? f.reason : ''}`);
  assert.deepEqual(
    failed.map((f) => `${f.id} ${f.name}`),
    [],
  );
  assert.equal(results.length, 61);
});
