/**
 * E2B sandboxes across a `sandbox serve` restart: a server over a runtime home creates sandboxes with
 * the unmodified `e2b` SDK (the operator's and a tenant's, through a managed key), then closes; a new
 * server over the same home and state directory finds them by sandbox id with their template, metadata,
 * envd access token and timeout — `Sandbox.connect(id)` runs commands and reads the files written
 * before, the list filtered by metadata shows them, and the tenant's stays hidden from another tenant.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { NotFoundError, Sandbox, type SandboxOpts } from 'e2b';
import type { RestServer } from '../src/rest/server.ts';
import { cleanupAll, ensureRegistry } from './runtime-helpers.ts';
import { createKey, OPERATOR_KEY, startTenantServer } from './tenants-helpers.ts';

let first: RestServer | null = null;
let second: RestServer | null = null;

before(() => ensureRegistry());

after(async () => {
  await first?.close();
  await second?.close();
  await cleanupAll();
});

describe('E2B sandboxes across a server restart', { timeout: 300_000 }, () => {
  it('keeps template, metadata, token and timeout; connect, list and tenancy work after it', async () => {
    const started = await startTenantServer();
    first = started.server;
    const sdk = (url: string, apiKey: string): SandboxOpts => ({
      apiKey,
      apiUrl: url,
      sandboxUrl: url,
      validateApiKey: false,
      requestTimeoutMs: 120_000,
    });
    const alice = (await createKey(started.url, 'alice')).key;
    const bob = (await createKey(started.url, 'bob')).key;
    const metadata = { suite: 'e2b-restart', run: String(process.pid) };
    const ops = await Sandbox.create('base', {
      ...sdk(started.url, OPERATOR_KEY),
      metadata,
      timeoutMs: 600_000,
    });
    await ops.files.write('/home/user/note.txt', 'before the restart');
    const mine = await Sandbox.create('base', {
      ...sdk(started.url, alice),
      metadata: { owner: 'alice' },
    });
    const before = await ops.getInfo();
    await first.close();
    first = null;

    second = (await startTenantServer({ runtime: started.runtime })).server;
    const url = second.url;
    const again = await Sandbox.connect(ops.sandboxId, sdk(url, OPERATOR_KEY));
    const info = await again.getInfo();
    assert.equal(info.templateId, 'base');
    assert.deepEqual(info.metadata, metadata);
    assert.equal(info.endAt.getTime(), before.endAt.getTime(), 'connect never shortens the timeout');
    assert.equal(
      (await again.commands.run('cat /home/user/note.txt; echo; whoami')).stdout,
      'before the restart\nuser\n',
    );
    // The access token issued before the restart still opens envd.
    const health = await fetch(`${url}/files?path=/home/user/note.txt`, {
      headers: {
        'e2b-sandbox-id': ops.sandboxId,
        'e2b-sandbox-port': '49983',
        'x-access-token': String((ops as unknown as { envdAccessToken: string }).envdAccessToken),
      },
    });
    assert.equal(await health.text(), 'before the restart');

    const listed = await Sandbox.list({ ...sdk(url, OPERATOR_KEY), query: { metadata } }).nextItems();
    assert.deepEqual(
      listed.map((s) => [s.sandboxId, s.templateId]),
      [[ops.sandboxId, 'base']],
    );

    // The tenant's sandbox is found by its id for its tenant only, with its metadata.
    const hers = await Sandbox.connect(mine.sandboxId, sdk(url, alice));
    assert.deepEqual((await hers.getInfo()).metadata, { owner: 'alice' });
    assert.equal((await hers.commands.run('echo hi')).stdout, 'hi\n');
    await assert.rejects(Sandbox.getInfo(mine.sandboxId, sdk(url, bob)), NotFoundError);
    assert.equal(await Sandbox.kill(mine.sandboxId, sdk(url, bob)), false);
    assert.equal(await hers.isRunning(), true);

    await again.kill();
    await hers.kill();
    assert.deepEqual(await Sandbox.list({ ...sdk(url, OPERATOR_KEY), query: { metadata } }).nextItems(), []);
  });
});
