/** Permission code syntax, wildcard matching, deny-wins, the matcher cache, and configured ABAC policies. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ValidationError } from '../src/errors.ts';
import {
  MatcherCache,
  normalizePermissionCode,
  normalizePermissionCodes,
  PermissionMatcher,
  tryNormalizePermissionCode,
} from '../src/permissions.ts';
import { PolicyRegistry } from '../src/policies.ts';
import { AuthorizationReason, decision, isGrantingReason, reasonName } from '../src/reasons.ts';

describe('AuthorizationReason', () => {
  test('has exactly the spec names and values 0–3, 10–17', () => {
    assert.deepEqual(
      { ...AuthorizationReason },
      {
        Granted: 0,
        GrantedByPolicy: 1,
        NotProtected: 2,
        GuestAllowed: 3,
        NoMatchingGrant: 10,
        DeniedByRule: 11,
        GuestNotAllowed: 12,
        SubjectDisabled: 13,
        PolicyNotSatisfied: 14,
        PolicyNotFound: 15,
        InvalidPermissionCode: 16,
        InvalidCredential: 17,
      },
    );
    assert.ok(Object.isFrozen(AuthorizationReason));
    for (const value of Object.values(AuthorizationReason)) {
      assert.equal(decision(value).isGranted, value <= 3);
      assert.equal(isGrantingReason(value), value <= 3);
    }
    assert.equal(reasonName(11), 'DeniedByRule');
    assert.throws(() => reasonName(5 as AuthorizationReason), RangeError);
  });
});

describe('permission codes', () => {
  test('normalize: trim and lower case; wildcards only where allowed', () => {
    assert.equal(normalizePermissionCode('  Auth.Admin.Users '), 'auth.admin.users');
    assert.equal(tryNormalizePermissionCode('auth.admin.**'), 'auth.admin.**');
    assert.equal(tryNormalizePermissionCode('auth.*.read'), 'auth.*.read');
    assert.equal(tryNormalizePermissionCode('auth.*', { allowWildcards: false }), undefined);
    for (const bad of [
      '',
      ' ',
      'a..b',
      '.a',
      'a.',
      'a.**.b',
      'a.b c',
      'a.***',
      'ä.b',
      '-a',
      'a'.repeat(65),
      `${'a.'.repeat(40)}a`,
      42,
      null,
    ]) {
      assert.equal(tryNormalizePermissionCode(bad), undefined, `accepted ${String(bad)}`);
    }
  });

  test('invalid codes throw ValidationError naming the field and rule', () => {
    assert.throws(
      () => normalizePermissionCodes(['shop.read', 'shop..write'], 'permissions'),
      (error: unknown) =>
        error instanceof ValidationError &&
        error.field === 'permissions[1]' &&
        error.rule === 'permission_code',
    );
    assert.deepEqual(normalizePermissionCodes(['b.x', 'A.x', 'b.X'], 'p'), ['a.x', 'b.x']);
  });

  test('`*` matches one segment, `**` one or more remaining segments', () => {
    const m = new PermissionMatcher(['auth.admin.**', 'shop.*.read', 'exact.code'], []);
    assert.equal(m.evaluate('auth.admin.users'), 'allow');
    assert.equal(m.evaluate('auth.admin.users.read'), 'allow');
    assert.equal(m.evaluate('auth.admin'), 'none');
    assert.equal(m.evaluate('auth.adminx.users'), 'none');
    assert.equal(m.evaluate('shop.orders.read'), 'allow');
    assert.equal(m.evaluate('shop.orders.items.read'), 'none');
    assert.equal(m.evaluate('shop.read'), 'none');
    assert.equal(m.evaluate('exact.code'), 'allow');
    assert.equal(m.evaluate('exact.code.more'), 'none');
  });

  test('deny wins over allow, including a narrower deny under a broad grant', () => {
    const m = new PermissionMatcher(['**'], ['auth.admin.**', 'shop.*.delete']);
    assert.equal(m.evaluate('shop.orders.read'), 'allow');
    assert.equal(m.evaluate('shop.orders.delete'), 'deny');
    assert.equal(m.evaluate('auth.admin.users'), 'deny');
    const both = new PermissionMatcher(['a.b'], ['a.b']);
    assert.equal(both.evaluate('a.b'), 'deny');
    // memoized answers stay right on repeated calls
    for (let i = 0; i < 3; i++) assert.equal(m.evaluate('shop.orders.delete'), 'deny');
  });

  test('MatcherCache reuses a matcher while the version is unchanged and recompiles when it changes', () => {
    const cache = new MatcherCache(2);
    let compiles = 0;
    const rules = (allow: string[]) => () => {
      compiles++;
      return { allow, deny: [] };
    };
    const a1 = cache.get('u1', 'v1', rules(['x.y']));
    assert.equal(cache.get('u1', 'v1', rules(['z.z'])), a1);
    assert.equal(compiles, 1);
    const a2 = cache.get('u1', 'v2', rules(['z.z']));
    assert.notEqual(a2, a1);
    assert.equal(a2.evaluate('x.y'), 'none');
    assert.equal(a2.evaluate('z.z'), 'allow');
    cache.get('u2', 'v1', rules([]));
    cache.get('u3', 'v1', rules([]));
    assert.equal(cache.size, 2, 'bounded');
  });
});

describe('policies', () => {
  test('configured policies: all/any conditions over subject, resource and request', async () => {
    const registry = new PolicyRegistry().registerConfig({
      'same-department': {
        all: [{ path: 'subject.claims.dept', equalsPath: 'resource.dept' }],
        any: [
          { path: 'request.method', in: ['GET', 'HEAD'] },
          { path: 'subject.roles', contains: 'editor' },
        ],
      },
    });
    const ctx = (dept: string, method: string, roles: string[] = []) => ({
      subject: {
        kind: 'user' as const,
        id: 'u',
        name: 'u',
        roles,
        clientId: null,
        scopes: [],
        claims: { dept: 'sales' },
      },
      resource: { dept },
      request: { method, url: '/', headers: {} },
    });
    assert.equal(await registry.evaluate('same-department', ctx('sales', 'GET')), 'satisfied');
    assert.equal(await registry.evaluate('same-department', ctx('sales', 'POST')), 'not_satisfied');
    assert.equal(await registry.evaluate('same-department', ctx('sales', 'POST', ['editor'])), 'satisfied');
    assert.equal(await registry.evaluate('same-department', ctx('hr', 'GET')), 'not_satisfied');
    assert.equal(await registry.evaluate('missing', ctx('sales', 'GET')), 'not_found');
  });

  test('a throwing policy fails closed; bad configuration names the field and registers nothing', async () => {
    const registry = new PolicyRegistry().register('boom', () => {
      throw new Error('x');
    });
    assert.equal(
      await registry.evaluate('boom', {
        subject: null,
        resource: null,
        request: { method: 'GET', url: '/', headers: {} },
      }),
      'not_satisfied',
    );
    assert.throws(
      () =>
        registry.registerConfig({
          ok: { all: [{ path: 'subject.id', exists: true }] },
          bad: { all: [{ path: 'nope.x', equals: 1 }] },
        }),
      (error: unknown) => error instanceof ValidationError && error.field === 'policies.bad.all[0].path',
    );
    assert.equal(registry.has('ok'), false, 'all or nothing');
    assert.throws(
      () => registry.registerConfig({ two: { all: [{ path: 'subject.id', equals: 'a', exists: true }] } }),
      (error: unknown) => error instanceof ValidationError && error.rule === 'one_operator',
    );
  });
});
