/**
 * Refresh tokens with a time prefix at the token endpoint: issued tokens carry their issue time, rotate and
 * revoke through their time-ordered store key; tokens stored under the bare SHA-256 (issued without the
 * prefix) still refresh; a valid token with a changed prefix is refused.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { familyIdFor } from '../src/oauth/context.ts';
import { hashRefreshToken, hashToken, newOpaqueToken } from '../src/oauth/tokens.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { UserRecord } from '../src/store/types.ts';
import {
  basic,
  DEMO_SECRET,
  postForm,
  serviceToken,
  startTestServer,
  type TestServer,
} from './oauth-fixtures.ts';

let t: TestServer;
let store: SqliteAuthStore;
let alice: UserRecord;
/** The clock of the store and the server, ms since the epoch. */
const clock = { now: Date.now() };
before(async () => {
  const now = () => clock.now;
  store = new SqliteAuthStore({ now });
  t = await startTestServer({ store, now });
  alice = await t.createUser('alice', 'alice-password-1');
});
after(() => t.close());

const token = (params: Record<string, string>) => serviceToken(t.base, params);
const refresh = (refreshToken: string) => token({ grant_type: 'refresh_token', refresh_token: refreshToken });
const TOKEN_FORMAT = /^[0-9a-f]{12}\.[A-Za-z0-9_-]{43}$/;

test('an issued refresh token starts with its issue time and rotates to a later one', async () => {
  const res = await token({ grant_type: 'password', username: 'alice', password: 'alice-password-1' });
  assert.equal(res.status, 200);
  const first = ((await res.json()) as { refresh_token: string }).refresh_token;
  assert.match(first, TOKEN_FORMAT);
  assert.equal(Number.parseInt(first.slice(0, 12), 16), clock.now);
  const stored = await store.findRefreshToken(hashRefreshToken(first));
  assert.equal(stored?.userId, alice.id, 'stored under the prefixed key');
  assert.equal(await store.findRefreshToken(hashToken(first)), undefined, 'not under the bare hash');

  clock.now += 1000;
  const rotated = await refresh(first);
  assert.equal(rotated.status, 200);
  const second = ((await rotated.json()) as { refresh_token: string }).refresh_token;
  assert.match(second, TOKEN_FORMAT);
  assert.ok(hashRefreshToken(second) > hashRefreshToken(first), 'the successor sorts after its predecessor');
  assert.equal((await refresh(first)).status, 400, 'the used token is refused (reuse detection)');
  assert.equal((await refresh(second)).status, 400, 'and its family is revoked');
});

test('a refresh token stored under the bare SHA-256 (no time prefix) still refreshes', async () => {
  const legacy = newOpaqueToken();
  await store.insertRefreshToken({
    tokenHash: hashToken(legacy),
    familyId: familyIdFor(randomUUID(), alice.securityStamp),
    clientId: 'demo-service',
    userId: alice.id,
    scope: 'api',
    createdAt: clock.now,
    expiresAt: clock.now + 3_600_000,
  });
  const res = await refresh(legacy);
  const body = (await res.json()) as { refresh_token: string };
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.match(body.refresh_token, TOKEN_FORMAT, 'its successor has the prefix');
  assert.equal((await store.findRefreshToken(hashToken(legacy)))?.usedAt, clock.now);
});

test('a valid refresh token with another time prefix is refused; revocation finds the prefixed key', async () => {
  const res = await token({ grant_type: 'password', username: 'alice', password: 'alice-password-1' });
  const issued = ((await res.json()) as { refresh_token: string }).refresh_token;
  const forged = `${(Number.parseInt(issued.slice(0, 12), 16) + 1).toString(16).padStart(12, '0')}${issued.slice(12)}`;
  const refused = await refresh(forged);
  assert.equal(refused.status, 400);
  assert.equal(((await refused.json()) as { error: string }).error, 'invalid_grant');

  const revoked = await postForm(
    t.base,
    '/connect/revocation',
    { token: issued, token_type_hint: 'refresh_token' },
    { authorization: basic('demo-service', DEMO_SECRET) },
  );
  assert.equal(revoked.status, 200);
  assert.notEqual((await store.findRefreshToken(hashRefreshToken(issued)))?.revokedAt, null);
  assert.equal((await refresh(issued)).status, 400);
});
