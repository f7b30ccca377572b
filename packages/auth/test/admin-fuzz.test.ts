/**
 * Fuzz pass over every route of the administration API (issue 6): malformed JSON, non-object JSON, wrong
 * content types, wrong field types, oversized strings and arrays, unknown fields and bad query strings —
 * each request, sent by a caller holding `auth.admin.**` against records that exist (so that only the
 * malformation can fail it), must get a 4xx with the spec's `{ "error" }` body (never a 5xx), and the store
 * (users, roles, permissions, clients, audit log) must be exactly as before.
 *
 * Generated with fast-check from a fixed seed, so a failure reproduces.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { type AdminFixture, adminFixture, snapshot } from './admin-fixture.ts';

const SEED = 20261121;
const RUNS = 30;

let f: AdminFixture;
let root: string;
/** Placeholders until `before` creates the records (test names are computed first). */
let ids = { user: '{id}', role: '{id}' };

before(async () => {
  f = await adminFixture();
  root = (await f.caller('root', ['auth.admin.**'])).token;
  await f.store.createRole({ name: 'staff', permissions: ['shop.read'] });
  ids = {
    user: (await f.store.createUser({ userName: 'target' })).id,
    role: (await f.store.createRole({ name: 'target-role' })).id,
  };
  await f.store.createPermission({ code: 'target.code' });
  await f.store.createClient({
    clientId: 'target-client',
    clientType: 'confidential',
    secretHash: await f.hasher.hash('initial-secret-123'),
  });
});
after(() => f.close());

type FieldKind = 'string' | 'boolean' | 'strings' | 'enum';
type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

interface BodyRoute {
  method: Method;
  path: () => string;
  /** A body that would be accepted (it must fail only through the malformation). */
  valid: Record<string, unknown>;
  /** Field kinds and, for strings and lists, the largest accepted size. */
  fields: Record<string, { kind: FieldKind; max?: number }>;
  /** Whether JSON `null` (no body) is acceptable. */
  nullable?: boolean;
}

const str = (max: number) => ({ kind: 'string' as const, max });
const list = (max: number) => ({ kind: 'strings' as const, max });
const bool = { kind: 'boolean' as const };
const enumField = { kind: 'enum' as const };

const BODY_ROUTES: BodyRoute[] = [
  {
    method: 'POST',
    path: () => 'users',
    valid: {
      userName: 'fuzz-user',
      password: 'long enough pw',
      isEnabled: true,
      roles: ['staff'],
      directPermissions: ['a.b'],
      deniedPermissions: ['c.d'],
    },
    fields: {
      userName: str(256),
      password: str(1024),
      isEnabled: bool,
      roles: list(200),
      directPermissions: list(1000),
      deniedPermissions: list(1000),
    },
  },
  {
    method: 'PATCH',
    path: () => `users/${ids.user}`,
    valid: {
      userName: 'renamed',
      isEnabled: false,
      roles: ['staff'],
      directPermissions: ['a.b'],
      deniedPermissions: [],
    },
    fields: {
      userName: str(256),
      isEnabled: bool,
      roles: list(200),
      directPermissions: list(1000),
      deniedPermissions: list(1000),
    },
  },
  {
    method: 'PUT',
    path: () => `users/${ids.user}/password`,
    valid: { password: 'long enough pw' },
    fields: { password: str(1024) },
  },
  ...(['enable', 'disable', 'unlock'] as const).map((action) => ({
    method: 'POST' as const,
    path: () => `users/${ids.user}/${action}`,
    valid: {},
    fields: {},
    nullable: true,
  })),
  { method: 'DELETE', path: () => `users/${ids.user}`, valid: {}, fields: {}, nullable: true },
  {
    method: 'POST',
    path: () => 'roles',
    valid: { name: 'fuzz-role', description: 'd', permissions: ['a.b'], deniedPermissions: [] },
    fields: { name: str(64), description: str(1024), permissions: list(1000), deniedPermissions: list(1000) },
  },
  {
    method: 'PATCH',
    path: () => `roles/${ids.role}`,
    valid: { name: 'renamed-role', description: 'd', permissions: ['a.b'], deniedPermissions: [] },
    fields: { name: str(64), description: str(1024), permissions: list(1000), deniedPermissions: list(1000) },
  },
  { method: 'DELETE', path: () => `roles/${ids.role}`, valid: {}, fields: {}, nullable: true },
  {
    method: 'POST',
    path: () => 'permissions',
    valid: { code: 'fuzz.code', description: 'd' },
    fields: { code: str(256), description: str(1024) },
  },
  {
    method: 'PATCH',
    path: () => 'permissions/target.code',
    valid: { description: 'd' },
    fields: { description: str(1024) },
  },
  { method: 'DELETE', path: () => 'permissions/target.code', valid: {}, fields: {}, nullable: true },
  {
    method: 'POST',
    path: () => 'clients',
    valid: {
      clientId: 'fuzz-client',
      displayName: 'Fuzz',
      clientType: 'confidential',
      clientSecret: 'a-secret-of-twenty-chars',
      isEnabled: true,
      redirectUris: ['https://app.test/cb'],
      allowedGrantTypes: ['client_credentials'],
      allowedScopes: ['api'],
      permissions: ['a.b'],
    },
    fields: {
      clientId: str(128),
      displayName: str(1024),
      clientType: enumField,
      clientSecret: str(1024),
      isEnabled: bool,
      redirectUris: list(50),
      allowedGrantTypes: list(10),
      allowedScopes: list(200),
      permissions: list(1000),
    },
  },
  {
    method: 'PATCH',
    path: () => 'clients/target-client',
    valid: {
      displayName: 'x',
      isEnabled: false,
      redirectUris: [],
      allowedGrantTypes: ['password'],
      allowedScopes: ['api'],
      permissions: [],
    },
    fields: {
      displayName: str(1024),
      isEnabled: bool,
      redirectUris: list(50),
      allowedGrantTypes: list(10),
      allowedScopes: list(200),
      permissions: list(1000),
    },
  },
  {
    method: 'POST',
    path: () => 'clients/target-client/secret',
    valid: { clientSecret: 'another-secret-of-20-chars' },
    fields: { clientSecret: str(1024) },
    nullable: true,
  },
  { method: 'DELETE', path: () => 'clients/target-client', valid: {}, fields: {}, nullable: true },
];

const GET_ROUTES: { path: () => string; params: string[] }[] = [
  { path: () => 'users', params: ['offset', 'limit', 'search'] },
  { path: () => `users/${ids.user}`, params: [] },
  { path: () => 'roles', params: ['offset', 'limit', 'search'] },
  { path: () => `roles/${ids.role}`, params: [] },
  { path: () => 'permissions', params: ['offset', 'limit', 'search'] },
  { path: () => 'permissions/target.code', params: [] },
  { path: () => 'clients', params: ['offset', 'limit', 'search'] },
  { path: () => 'clients/target-client', params: [] },
  {
    path: () => 'audit',
    params: ['category', 'outcome', 'subject', 'clientId', 'from', 'to', 'offset', 'limit'],
  },
];

// ── generators ──

const notString = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
);
const notBoolean = fc.oneof(
  fc.integer(),
  fc.constantFrom('true', 'false', '', 0, 1, null),
  fc.array(fc.boolean(), { maxLength: 2 }),
  fc.dictionary(fc.string(), fc.boolean(), { maxKeys: 2 }),
);
const notStringList = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.constant(null),
  fc.boolean(),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }),
  fc.array(fc.oneof(fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string(), { maxLength: 1 })), {
    minLength: 1,
    maxLength: 3,
  }),
);
const notEnum = fc.oneof(
  notString,
  fc.string().filter((s) => s !== 'public' && s !== 'confidential'),
);

function wrongValue(kind: FieldKind) {
  switch (kind) {
    case 'string':
      return notString;
    case 'boolean':
      return notBoolean;
    case 'strings':
      return notStringList;
    case 'enum':
      return notEnum;
  }
}

function oversized(spec: { kind: FieldKind; max?: number }) {
  const max = spec.max ?? 0;
  const big = fc.integer({ min: max + 1, max: max + 200_000 });
  if (spec.kind === 'string') return big.map((n) => 'x'.repeat(n));
  // an over-long element, or too many elements
  return fc.oneof(
    fc.integer({ min: 300, max: 100_000 }).map((n) => ['a'.repeat(n)]),
    fc.integer({ min: max + 1, max: max + 50 }).map((n) => Array.from({ length: n }, (_, i) => `p${i}.x`)),
  );
}

const malformedJson = fc
  .oneof(
    fc.string(),
    fc.constantFrom(
      '{',
      '{"a":}',
      '[1,]',
      "{'userName':'x'}",
      'NaN',
      '{"userName":"x"} trailing',
      '{"a":1,}',
      '\u0000',
      'undefined',
      '{"a":"\\u12"}',
    ),
  )
  .filter((s) => {
    try {
      JSON.parse(s);
      return false;
    } catch {
      return true;
    }
  });

const RESERVED = new Set(['__proto__', 'constructor', 'prototype']);
const unknownKey = (known: string[]) =>
  fc.string({ minLength: 1, maxLength: 40 }).filter((k) => !known.includes(k) && !RESERVED.has(k));

const nonObjectJson = (nullable: boolean) =>
  fc.oneof(
    fc.integer(),
    fc.string(),
    fc.boolean(),
    fc.array(fc.jsonValue(), { maxLength: 3 }),
    ...(nullable ? [] : [fc.constant(null)]),
  );

const wrongContentType = fc.constantFrom(
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'application/xml',
  'application/jsonp',
  'text/json',
  undefined,
);

// ── the property ──

async function expectRefused(method: Method, path: string, payload: string, headers: Record<string, string>) {
  const before = await snapshot(f.store);
  const r = await f.call(root, method, path, payload, headers);
  assert.ok(
    r.statusCode >= 400 && r.statusCode < 500,
    `${method} ${path} ${payload.slice(0, 120)} → ${r.statusCode} ${r.body.slice(0, 200)}`,
  );
  const body = JSON.parse(r.body);
  assert.deepEqual(Object.keys(body), ['error'], r.body);
  assert.equal(
    await snapshot(f.store),
    before,
    `${method} ${path} ${payload.slice(0, 120)} changed the store`,
  );
}

const JSON_HEADERS = { 'content-type': 'application/json' };
const options = (salt: number) => ({ seed: SEED + salt, numRuns: RUNS });

describe('fuzz: every route with a body refuses malformed input with a 4xx and changes nothing', () => {
  BODY_ROUTES.forEach((route, index) => {
    const name = `${route.method} ${route.path()}`;
    test(name, async () => {
      const path = route.path();
      const known = Object.keys(route.fields);
      const cases: fc.Arbitrary<{ payload: string; headers: Record<string, string> }>[] = [
        malformedJson.map((payload) => ({ payload, headers: JSON_HEADERS })),
        nonObjectJson(route.nullable === true).map((value) => ({
          payload: JSON.stringify(value),
          headers: JSON_HEADERS,
        })),
        fc.tuple(unknownKey(known), fc.jsonValue()).map(([key, value]) => ({
          payload: JSON.stringify({ ...route.valid, [key]: value }),
          headers: JSON_HEADERS,
        })),
        wrongContentType.map((type) => ({
          payload: JSON.stringify(route.valid),
          headers: type === undefined ? ({} as Record<string, string>) : { 'content-type': type },
        })),
      ];
      if (known.length > 0) {
        cases.push(
          fc
            .constantFrom(...known)
            .chain((field) =>
              wrongValue(route.fields[field]!.kind).map((value) => ({ ...route.valid, [field]: value })),
            )
            .map((body) => ({ payload: JSON.stringify(body), headers: JSON_HEADERS })),
          fc
            .constantFrom(...known.filter((k) => route.fields[k]!.max !== undefined))
            .chain((field) =>
              oversized(route.fields[field]!).map((value) => ({ ...route.valid, [field]: value })),
            )
            .map((body) => ({ payload: JSON.stringify(body), headers: JSON_HEADERS })),
        );
      }
      await fc.assert(
        fc.asyncProperty(fc.oneof(...cases), ({ payload, headers }) =>
          expectRefused(route.method, path, payload, headers),
        ),
        options(index),
      );
    });
  });
});

describe('fuzz: every GET route refuses bad query strings with a 4xx and changes nothing', () => {
  const badNumber = fc.oneof(
    fc.constantFrom('-1', '1.5', 'abc', '', '1001', '99999999999', 'NaN', '0x10', '[]'),
    fc.stringMatching(/^[a-z]{1,8}$/),
  );
  GET_ROUTES.forEach((route, index) => {
    test(`GET ${route.path()}`, async () => {
      const path = route.path();
      const cases: fc.Arbitrary<string>[] = [
        fc
          .tuple(
            fc.stringMatching(/^[A-Za-z_]{1,20}$/).filter((k) => !route.params.includes(k)),
            fc.string({ maxLength: 20 }),
          )
          .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(value)}`),
      ];
      if (route.params.includes('limit')) {
        cases.push(
          fc.tuple(fc.constantFrom('limit', 'offset'), badNumber).map(([key, value]) => {
            // limit 1..1000, offset 0..1e9: 0 is fine for offset, make it bad
            const v = key === 'offset' && (value === '' || value === '1001') ? '-5' : value;
            return `${key}=${encodeURIComponent(v)}`;
          }),
        );
      }
      if (route.params.includes('search')) {
        cases.push(fc.integer({ min: 257, max: 20_000 }).map((n) => `search=${'s'.repeat(n)}`));
      }
      if (route.params.includes('from')) {
        cases.push(
          fc
            .tuple(
              fc.constantFrom('from', 'to'),
              fc.oneof(
                fc.constantFrom('yesterday', '2026-13-01T00:00:00Z', '1700000000000', ''),
                fc.string({ maxLength: 12 }),
              ),
            )
            .map(([key, value]) => `${key}=${encodeURIComponent(value)}`),
          fc.integer({ min: 257, max: 5000 }).map((n) => `subject=${'u'.repeat(n)}`),
        );
      }
      await fc.assert(
        fc.asyncProperty(fc.oneof(...cases), async (query) => {
          const before = await snapshot(f.store);
          const r = await f.call(root, 'GET', `${path}?${query}`);
          assert.ok(
            r.statusCode >= 400 && r.statusCode < 500,
            `GET ${path}?${query.slice(0, 80)} → ${r.statusCode} ${r.body.slice(0, 200)}`,
          );
          assert.deepEqual(Object.keys(JSON.parse(r.body)), ['error']);
          assert.equal(await snapshot(f.store), before);
        }),
        options(100 + index),
      );
    });
  });
});
