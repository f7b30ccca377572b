/**
 * Second-factor storage on both stores (SQLite and a real throwaway PostgreSQL cluster): a TOTP time step
 * is claimed once even by concurrent requests, earlier steps are refused, recovery codes are single use,
 * passkey counters move by compare-and-set and passkeys change only for their owner, requirements apply
 * per user, role and client, deleting a user removes its factors. Then the
 * administration API routes of factors and requirements: views without secrets, 404s, separation of the
 * manage permissions, audit events, and the OpenAPI document listing them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type PostgresCluster, startPostgres } from '../../../scripts/postgres.ts';
import { PostgresAuthStore } from '../src/store/postgres.ts';
import { SqliteAuthStore } from '../src/store/sqlite.ts';
import type { AuthStore } from '../src/store/types.ts';
import { type AdminFixture, adminFixture } from './admin-fixture.ts';

const NOW = Date.UTC(2026, 0, 1);

function factorContract(name: string, open: () => Promise<AuthStore>): void {
  describe(`${name} factors`, () => {
    let store: AuthStore;
    before(async () => {
      store = await open();
    });
    after(() => store?.close());

    test('a TOTP step is accepted once, by one of many concurrent claims; earlier steps are refused', async () => {
      const user = await store.createUser({ userName: 'tina' });
      assert.equal(await store.factors.getTotp(user.id), undefined);
      await store.factors.setTotp(user.id, 'v1.sealed', 1000, NOW);
      const factor = await store.factors.getTotp(user.id);
      assert.deepEqual(factor, {
        userId: user.id,
        sealedSecret: 'v1.sealed',
        lastStep: 1000,
        createdAt: NOW,
        lastUsedAt: null,
      });
      assert.equal(await store.factors.claimTotpStep(user.id, 1000, NOW), false);
      const claims = await Promise.all(
        Array.from({ length: 8 }, () => store.factors.claimTotpStep(user.id, 1001, NOW + 1)),
      );
      assert.equal(claims.filter(Boolean).length, 1);
      assert.equal(await store.factors.claimTotpStep(user.id, 999, NOW + 2), false);
      assert.equal(await store.factors.claimTotpStep(user.id, 1003, NOW + 3), true);
      const after = await store.factors.getTotp(user.id);
      assert.equal(after?.lastStep, 1003);
      assert.equal(after?.lastUsedAt, NOW + 3);
      assert.equal(await store.factors.claimTotpStep('no-such-user', 5000, NOW), false);
    });

    test('recovery codes are single use, replaced as a set, removed with the TOTP factor and the user', async () => {
      const user = await store.createUser({ userName: 'rita' });
      await store.factors.setTotp(user.id, 'v1.s', 1, NOW);
      await store.factors.replaceRecoveryCodes(user.id, ['h1', 'h2', 'h3'], NOW);
      const uses = await Promise.all(
        Array.from({ length: 6 }, () => store.factors.useRecoveryCode(user.id, 'h2', NOW)),
      );
      assert.equal(uses.filter(Boolean).length, 1);
      assert.equal((await store.factors.summary(user.id)).recoveryCodesLeft, 2);
      await store.factors.replaceRecoveryCodes(user.id, ['h4'], NOW);
      assert.equal(await store.factors.useRecoveryCode(user.id, 'h1', NOW), false);
      assert.deepEqual(await store.factors.summary(user.id), {
        totpEnrolledAt: NOW,
        totpLastUsedAt: null,
        recoveryCodesLeft: 1,
      });
      const other = await store.createUser({ userName: 'otto' });
      assert.equal(await store.factors.useRecoveryCode(other.id, 'h4', NOW), false);
      assert.equal(await store.factors.removeTotp(user.id), true);
      assert.equal(await store.factors.removeTotp(user.id), false);
      assert.deepEqual(await store.factors.summary(user.id), {
        totpEnrolledAt: null,
        totpLastUsedAt: null,
        recoveryCodesLeft: 0,
      });
      await store.factors.setTotp(other.id, 'v1.o', 1, NOW);
      await store.factors.replaceRecoveryCodes(other.id, ['o1'], NOW);
      await store.deleteUser(other.id);
      assert.equal(await store.factors.getTotp(other.id), undefined);
      assert.equal((await store.factors.summary(other.id)).recoveryCodesLeft, 0);
    });

    test('passkeys: stored without secrets, listed per user, renamed and removed by their owner only, counters compare-and-set', async () => {
      const user = await store.createUser({ userName: 'paula' });
      const other = await store.createUser({ userName: 'peter' });
      const passkey = {
        id: 'cred-1',
        userId: user.id,
        publicKey: 'pAEDAzkBACBZ',
        counter: 5,
        transports: ['internal', 'hybrid'],
        deviceType: 'singleDevice',
        backedUp: false,
        name: 'Laptop',
        createdAt: NOW,
      };
      await store.factors.passkeys.add(passkey);
      await assert.rejects(store.factors.passkeys.add({ ...passkey, userId: other.id }));
      assert.deepEqual(await store.factors.passkeys.get('cred-1'), { ...passkey, lastUsedAt: null });
      assert.deepEqual(await store.factors.passkeys.list(other.id), []);
      assert.equal(await store.factors.passkeys.rename(other.id, 'cred-1', 'Mine now'), false);
      assert.equal(await store.factors.passkeys.rename(user.id, 'cred-1', 'Work laptop'), true);
      const uses = await Promise.all(
        Array.from({ length: 5 }, () => store.factors.passkeys.recordUse('cred-1', 5, 6, NOW + 1)),
      );
      assert.equal(uses.filter(Boolean).length, 1);
      const used = await store.factors.passkeys.get('cred-1');
      assert.equal(used?.counter, 6);
      assert.equal(used?.lastUsedAt, NOW + 1);
      assert.equal(used?.name, 'Work laptop');
      assert.equal(await store.factors.passkeys.remove(other.id, 'cred-1'), false);
      assert.equal(await store.factors.passkeys.remove(user.id, 'cred-1'), true);
      assert.equal(await store.factors.passkeys.get('cred-1'), undefined);
      await store.factors.passkeys.add({ ...passkey, id: 'cred-2' });
      await store.deleteUser(user.id);
      assert.equal(await store.factors.passkeys.get('cred-2'), undefined);
    });

    test('self-service link tokens are used once and only before they expire; sessions listed and revoked per user', async () => {
      const user = await store.createUser({ userName: 'sally' });
      await store.updateUser(user.id, { email: 'Sally@Example.org' });
      const account = store.factors.account;
      assert.equal(await account.findUserIdByEmail('sally@example.ORG'), user.id);
      assert.equal(await account.findUserIdByEmail('nobody@example.org'), undefined);
      const token = {
        userId: user.id,
        purpose: 'reset' as const,
        email: 'sally@example.org',
        createdAt: NOW,
      };
      await account.issueToken('hash-a', { ...token, expiresAt: NOW + 1000 });
      await account.issueToken('hash-b', { ...token, expiresAt: NOW + 1000 });
      assert.equal(await account.useToken('hash-a', 'verify_email', NOW), undefined, 'another purpose');
      const uses = await Promise.all(
        Array.from({ length: 5 }, () => account.useToken('hash-a', 'reset', NOW)),
      );
      assert.equal(uses.filter(Boolean).length, 1);
      assert.equal((await account.findToken('hash-a'))?.usedAt, NOW);
      assert.equal(await account.useToken('hash-b', 'reset', NOW + 1000), undefined, 'expired');
      assert.equal((await account.findToken('hash-b'))?.usedAt, null);

      for (const [hash, sid] of [
        ['s1', 'sid-1'],
        ['s2', 'sid-2'],
      ])
        await store.createLoginSession({
          sessionHash: hash!,
          userId: user.id,
          createdAt: NOW,
          expiresAt: NOW + 60_000,
          sid,
          amr: ['pwd'],
        });
      assert.deepEqual((await account.listSessions(user.id, NOW)).map((x) => x.sid).sort(), [
        'sid-1',
        'sid-2',
      ]);
      assert.deepEqual((await account.listSessions(user.id, NOW))[0]?.amr, ['pwd']);
      const other = await store.createUser({ userName: 'sid-thief' });
      assert.equal(await account.revokeSession(other.id, 'sid-1', NOW), false);
      assert.equal(await account.revokeSession(user.id, 'sid-1', NOW), true);
      assert.equal(await account.revokeAllSessions(user.id, NOW), 1);
      assert.deepEqual(await account.listSessions(user.id, NOW), []);
    });

    test('requirements apply to the named user, the holders of a role and sign-ins to a client', async () => {
      const role = await store.createRole({ name: 'finance' });
      const held = await store.createUser({ userName: 'fiona', roles: ['finance'] });
      const free = await store.createUser({ userName: 'fred' });
      assert.equal(await store.factors.isMfaRequired(held.id, null), false);
      await store.factors.requireMfa('role', role.id, NOW);
      await store.factors.requireMfa('role', role.id, NOW);
      assert.equal(await store.factors.isMfaRequired(held.id, null), true);
      assert.equal(await store.factors.isMfaRequired(free.id, null), false);
      await store.factors.requireMfa('client', 'payroll', NOW);
      assert.equal(await store.factors.isMfaRequired(free.id, 'payroll'), true);
      assert.equal(await store.factors.isMfaRequired(free.id, 'other'), false);
      await store.factors.requireMfa('user', free.id, NOW);
      assert.equal(await store.factors.isMfaRequired(free.id, null), true);
      assert.deepEqual(
        (await store.factors.listMfaRequirements()).map((r) => `${r.targetKind}:${r.targetId}`),
        [`client:payroll`, `role:${role.id}`, `user:${free.id}`],
      );
      assert.equal(await store.factors.unrequireMfa('role', role.id), true);
      assert.equal(await store.factors.unrequireMfa('role', role.id), false);
      assert.equal(await store.factors.isMfaRequired(held.id, null), false);
    });
  });
}

factorContract('SqliteAuthStore', async () => new SqliteAuthStore({ path: ':memory:' }));

let cluster: PostgresCluster | undefined;
after(async () => {
  await cluster?.stop();
});
factorContract('PostgresAuthStore', async () => {
  cluster ??= await startPostgres();
  return PostgresAuthStore.open({ url: await cluster.createDatabase(), maxConnections: 8 });
});

describe('administration API: factors and requirements', () => {
  let f: AdminFixture;
  let admin: string;
  let reader: string;
  let userAdmin: string;
  before(async () => {
    f = await adminFixture();
    admin = (await f.caller('root', ['auth.admin.**'])).token;
    reader = (await f.caller('reader', ['auth.admin.read'])).token;
    userAdmin = (await f.caller('useradmin', ['auth.admin.users'])).token;
  });
  after(() => f?.close());

  test('a user without factors; the TOTP factor shown without secrets and removed, audited', async () => {
    const user = await f.store.createUser({ userName: 'victor' });
    let res = await f.call(reader, 'GET', `users/${user.id}/factors`);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), {
      totpEnrolledAt: null,
      totpLastUsedAt: null,
      recoveryCodesLeft: 0,
      passkeys: 0,
      mfaRequired: false,
    });
    res = await f.call(userAdmin, 'DELETE', `users/${user.id}/factors/totp`);
    assert.equal(res.statusCode, 404);
    assert.match(res.json().error, /has no TOTP factor/);
    await f.store.factors.setTotp(user.id, 'v1.secret-material', 7, NOW);
    await f.store.factors.replaceRecoveryCodes(user.id, ['a', 'b'], NOW);
    res = await f.call(reader, 'GET', `users/${user.id}/factors`);
    assert.deepEqual(res.json(), {
      totpEnrolledAt: new Date(NOW).toISOString(),
      totpLastUsedAt: null,
      recoveryCodesLeft: 2,
      passkeys: 0,
      mfaRequired: false,
    });
    assert.doesNotMatch(res.body, /secret-material/);
    res = await f.call(reader, 'DELETE', `users/${user.id}/factors/totp`);
    assert.equal(res.statusCode, 403);
    assert.ok(await f.store.factors.getTotp(user.id));
    res = await f.call(userAdmin, 'DELETE', `users/${user.id}/factors/totp`);
    assert.equal(res.statusCode, 204);
    assert.equal(await f.store.factors.getTotp(user.id), undefined);
    const audit = await f.store.listAudit({ category: 'Admin', limit: 5 });
    assert.equal(audit.items[0]?.details?.action, 'factor.remove');
    assert.equal((await f.call(reader, 'GET', 'users/nobody/factors')).statusCode, 404);
  });

  test("a user's passkeys listed without key material and removed, audited", async () => {
    const user = await f.store.createUser({ userName: 'xena' });
    await f.store.factors.passkeys.add({
      id: 'xena-key',
      userId: user.id,
      publicKey: 'public-key-material',
      counter: 0,
      transports: ['usb'],
      deviceType: 'multiDevice',
      backedUp: true,
      name: 'Phone',
      createdAt: NOW,
    });
    let res = await f.call(reader, 'GET', `users/${user.id}/passkeys`);
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json().items, [
      {
        id: 'xena-key',
        name: 'Phone',
        deviceType: 'multiDevice',
        backedUp: true,
        transports: ['usb'],
        createdAt: new Date(NOW).toISOString(),
        lastUsedAt: null,
      },
    ]);
    assert.doesNotMatch(res.body, /public-key-material/);
    assert.equal((await f.call(reader, 'GET', `users/${user.id}/factors`)).json().passkeys, 1);
    assert.equal((await f.call(reader, 'DELETE', `users/${user.id}/passkeys/xena-key`)).statusCode, 403);
    assert.equal((await f.call(userAdmin, 'DELETE', `users/${user.id}/passkeys/nope`)).statusCode, 404);
    res = await f.call(userAdmin, 'DELETE', `users/${user.id}/passkeys/xena-key`);
    assert.equal(res.statusCode, 204);
    assert.deepEqual(await f.store.factors.passkeys.list(user.id), []);
    const event = (await f.store.listAudit({ category: 'Admin', limit: 1 })).items[0];
    assert.equal(event?.details?.action, 'factor.remove');
  });

  test('requirements per user, role and client need the area permission, 404 for unknown targets', async () => {
    const role = await f.store.createRole({ name: 'auditors' });
    const user = await f.store.createUser({ userName: 'wanda', roles: ['auditors'] });
    await f.store.createClient({
      clientId: 'ledger',
      clientType: 'public',
      redirectUris: ['https://ledger.test/cb'],
      allowedGrantTypes: ['authorization_code'],
      allowedScopes: ['openid'],
    });
    assert.equal((await f.call(userAdmin, 'PUT', `roles/${role.id}/mfa-required`)).statusCode, 403);
    assert.equal(await f.store.factors.isMfaRequired(user.id, null), false);
    assert.equal((await f.call(admin, 'PUT', `roles/${role.id}/mfa-required`)).statusCode, 204);
    assert.equal((await f.call(admin, 'PUT', `roles/${role.id}/mfa-required`)).statusCode, 204);
    assert.equal((await f.call(admin, 'PUT', 'roles/no-such-role/mfa-required')).statusCode, 404);
    assert.equal((await f.call(admin, 'PUT', 'clients/ledger/mfa-required')).statusCode, 204);
    assert.equal((await f.call(userAdmin, 'PUT', `users/${user.id}/mfa-required`)).statusCode, 204);
    let res = await f.call(reader, 'GET', `users/${user.id}/factors`);
    assert.equal(res.json().mfaRequired, true);
    res = await f.call(reader, 'GET', 'mfa-requirements');
    assert.equal(res.statusCode, 200);
    assert.deepEqual(
      res.json().items.map((r: { targetKind: string; targetId: string }) => `${r.targetKind}:${r.targetId}`),
      ['client:ledger', `role:${role.id}`, `user:${user.id}`],
    );
    assert.equal((await f.call(admin, 'DELETE', `roles/${role.id}/mfa-required`)).statusCode, 204);
    res = await f.call(admin, 'DELETE', `roles/${role.id}/mfa-required`);
    assert.equal(res.statusCode, 404);
    assert.match(res.json().error, /no second-factor requirement for role/);
    const actions = (await f.store.listAudit({ category: 'Admin', limit: 4 })).items.map(
      (e) => e.details?.action,
    );
    assert.deepEqual(actions, ['mfa.unrequire', 'mfa.require', 'mfa.require', 'mfa.require']);
  });

  test('the OpenAPI document lists the routes', async () => {
    const res = await f.app.inject({ method: 'GET', url: '/auth-admin/api/openapi.json' });
    assert.equal(res.statusCode, 200);
    const paths = Object.keys(res.json().paths);
    for (const path of [
      '/auth-admin/api/users/{id}/factors',
      '/auth-admin/api/users/{id}/factors/totp',
      '/auth-admin/api/users/{id}/mfa-required',
      '/auth-admin/api/roles/{id}/mfa-required',
      '/auth-admin/api/clients/{clientId}/mfa-required',
      '/auth-admin/api/mfa-requirements',
      '/auth-admin/api/users/{id}/passkeys',
      '/auth-admin/api/users/{id}/passkeys/{credentialId}',
    ])
      assert.ok(paths.includes(path), `${path} in ${paths.join(', ')}`);
  });
});
