/**
 * Every row of spec 001's AuthorizationReason table and status mapping, through a real Fastify app with the
 * plugin and through the plain Node `(req, res, next)` adapter, plus the security-stamp rule, `OnDenied`, the
 * request context and matcher-cache invalidation.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import type { EndpointRequirement } from '../src/authorization.ts';
import { authPlugin } from '../src/middleware/fastify.ts';
import { type AuthorizedRequest, createAuthMiddleware } from '../src/middleware/node.ts';
import { AuthorizationReason as R } from '../src/reasons.ts';
import { fixture } from './helpers.ts';

const routes: Record<string, EndpointRequirement | undefined> = {
  '/open': undefined,
  '/catalog': { permission: 'shop.catalog.read', allowGuest: true },
  '/orders': { permission: 'shop.orders.read' },
  '/orders-delete': { permission: 'shop.orders.delete' },
  '/bad-code': { permission: 'shop..orders' },
  '/bad-wildcard': { permission: 'shop.*' },
  '/owned/:ownerId': { permission: 'shop.orders.read', policy: 'owner' },
  '/missing-policy': { permission: 'shop.orders.read', policy: 'nope' },
  '/guest-policy': { allowGuest: true, policy: 'tenant-acme' },
  '/guest-missing-policy': { allowGuest: true, policy: 'nope' },
  '/guest-secret': { permission: 'shop.catalog.secret', allowGuest: true },
  '/guest-premium': { permission: 'shop.premium.read', allowGuest: true },
};

type TokenName =
  | 'none'
  | 'alice'
  | 'bob'
  | 'carol'
  | 'dave'
  | 'svc'
  | 'garbage'
  | 'expired'
  | 'foreign'
  | 'basic'
  | 'empty';

interface Row {
  name: string;
  path: string;
  token: TokenName;
  headers?: Record<string, string>;
  status: number;
  reason: R;
  error?: 'unauthorized' | 'invalid_token' | 'forbidden';
  permission?: string | null;
}

// status and header follow from `error`: unauthorized → 401 + `Bearer`; invalid_token → 401 +
// `Bearer error="invalid_token"`; forbidden → 403 without WWW-Authenticate.
const rows = (aliceId: string): Row[] => [
  {
    name: 'NotProtected (2): no permission declared',
    path: '/open',
    token: 'none',
    status: 200,
    reason: R.NotProtected,
  },
  {
    name: 'GuestAllowed (3): guest on a guest endpoint',
    path: '/catalog',
    token: 'none',
    status: 200,
    reason: R.GuestAllowed,
  },
  {
    name: 'Granted (0): role grant with `*`',
    path: '/orders',
    token: 'alice',
    status: 200,
    reason: R.Granted,
  },
  {
    name: 'Granted (0): client-credentials token',
    path: '/orders',
    token: 'svc',
    status: 200,
    reason: R.Granted,
  },
  {
    name: 'GrantedByPolicy (1)',
    path: `/owned/${aliceId}`,
    token: 'alice',
    status: 200,
    reason: R.GrantedByPolicy,
  },
  {
    name: 'GrantedByPolicy (1) for a guest (configured policy)',
    path: '/guest-policy',
    token: 'none',
    headers: { 'x-tenant': 'acme' },
    status: 200,
    reason: R.GrantedByPolicy,
  },
  {
    name: 'authenticated without grant on a guest endpoint → GuestAllowed',
    path: '/catalog',
    token: 'alice',
    status: 200,
    reason: R.GuestAllowed,
  },
  {
    name: 'authenticated with grant on a guest endpoint → Granted',
    path: '/catalog',
    token: 'bob',
    status: 200,
    reason: R.Granted,
  },
  // ── 401 ──
  {
    name: 'GuestNotAllowed (12) → 401 unauthorized',
    path: '/orders',
    token: 'none',
    status: 401,
    reason: R.GuestNotAllowed,
    error: 'unauthorized',
    permission: 'shop.orders.read',
  },
  {
    name: 'non-Bearer scheme counts as guest → 401 unauthorized',
    path: '/orders',
    token: 'basic',
    status: 401,
    reason: R.GuestNotAllowed,
    error: 'unauthorized',
    permission: 'shop.orders.read',
  },
  {
    name: 'NoMatchingGrant (10) unauthenticated → 401',
    path: '/guest-premium',
    token: 'none',
    status: 401,
    reason: R.NoMatchingGrant,
    error: 'unauthorized',
    permission: 'shop.premium.read',
  },
  {
    name: 'DeniedByRule (11) unauthenticated → 401',
    path: '/guest-secret',
    token: 'none',
    status: 401,
    reason: R.DeniedByRule,
    error: 'unauthorized',
    permission: 'shop.catalog.secret',
  },
  {
    name: 'InvalidPermissionCode (16) unauthenticated → 401',
    path: '/bad-code',
    token: 'none',
    status: 401,
    reason: R.InvalidPermissionCode,
    error: 'unauthorized',
    permission: 'shop..orders',
  },
  {
    name: 'PolicyNotSatisfied (14) unauthenticated → 401',
    path: '/guest-policy',
    token: 'none',
    headers: { 'x-tenant': 'globex' },
    status: 401,
    reason: R.PolicyNotSatisfied,
    error: 'unauthorized',
    permission: null,
  },
  {
    name: 'PolicyNotFound (15) unauthenticated → 401',
    path: '/guest-missing-policy',
    token: 'none',
    status: 401,
    reason: R.PolicyNotFound,
    error: 'unauthorized',
    permission: null,
  },
  {
    name: 'InvalidCredential (17): garbage token → 401 invalid_token',
    path: '/orders',
    token: 'garbage',
    status: 401,
    reason: R.InvalidCredential,
    error: 'invalid_token',
    permission: null,
  },
  {
    name: 'InvalidCredential (17): expired token',
    path: '/orders',
    token: 'expired',
    status: 401,
    reason: R.InvalidCredential,
    error: 'invalid_token',
    permission: null,
  },
  {
    name: 'InvalidCredential (17): token signed by another key',
    path: '/orders',
    token: 'foreign',
    status: 401,
    reason: R.InvalidCredential,
    error: 'invalid_token',
    permission: null,
  },
  {
    name: 'InvalidCredential (17): empty Bearer credentials',
    path: '/orders',
    token: 'empty',
    status: 401,
    reason: R.InvalidCredential,
    error: 'invalid_token',
    permission: null,
  },
  {
    name: 'InvalidCredential (17) even on a guest endpoint',
    path: '/catalog',
    token: 'garbage',
    status: 401,
    reason: R.InvalidCredential,
    error: 'invalid_token',
    permission: null,
  },
  // ── 403 ──
  {
    name: 'NoMatchingGrant (10) authenticated → 403',
    path: '/orders',
    token: 'bob',
    status: 403,
    reason: R.NoMatchingGrant,
    error: 'forbidden',
    permission: 'shop.orders.read',
  },
  {
    name: 'DeniedByRule (11) authenticated → 403 (deny wins over `**`)',
    path: '/orders-delete',
    token: 'carol',
    status: 403,
    reason: R.DeniedByRule,
    error: 'forbidden',
    permission: 'shop.orders.delete',
  },
  {
    name: 'SubjectDisabled (13): disabled after the token was issued → 403',
    path: '/orders',
    token: 'dave',
    status: 403,
    reason: R.SubjectDisabled,
    error: 'forbidden',
    permission: null,
  },
  {
    name: 'PolicyNotSatisfied (14) authenticated → 403',
    path: '/owned/someone-else',
    token: 'alice',
    status: 403,
    reason: R.PolicyNotSatisfied,
    error: 'forbidden',
    permission: null,
  },
  {
    name: 'PolicyNotFound (15) authenticated → 403',
    path: '/missing-policy',
    token: 'alice',
    status: 403,
    reason: R.PolicyNotFound,
    error: 'forbidden',
    permission: null,
  },
  {
    name: 'InvalidPermissionCode (16) authenticated → 403',
    path: '/bad-code',
    token: 'alice',
    status: 403,
    reason: R.InvalidPermissionCode,
    error: 'forbidden',
    permission: 'shop..orders',
  },
  {
    name: 'InvalidPermissionCode (16): wildcard declared by endpoint',
    path: '/bad-wildcard',
    token: 'carol',
    status: 403,
    reason: R.InvalidPermissionCode,
    error: 'forbidden',
    permission: 'shop.*',
  },
];

const names = [
  'Granted',
  'GrantedByPolicy',
  'NotProtected',
  'GuestAllowed',
  'NoMatchingGrant',
  'DeniedByRule',
  'GuestNotAllowed',
  'SubjectDisabled',
  'PolicyNotSatisfied',
  'PolicyNotFound',
  'InvalidPermissionCode',
  'InvalidCredential',
];

async function world() {
  const f = await fixture({ guestRole: 'guest' });
  const { store, policies } = f;
  await store.createRole({
    name: 'guest',
    permissions: ['shop.catalog.*'],
    deniedPermissions: ['shop.catalog.secret'],
  });
  await store.createRole({ name: 'clerk', permissions: ['shop.orders.*'] });
  const alice = await store.createUser({ userName: 'alice', roles: ['clerk'] });
  const bob = await store.createUser({ userName: 'bob', directPermissions: ['shop.catalog.read'] });
  const carol = await store.createUser({
    userName: 'carol',
    roles: ['clerk'],
    directPermissions: ['shop.**'],
    deniedPermissions: ['shop.orders.delete'],
  });
  const dave = await store.createUser({ userName: 'dave', roles: ['clerk'] });
  const svc = await store.createClient({
    clientId: 'svc',
    clientType: 'confidential',
    secretHash: '$scrypt$x',
    allowedGrantTypes: ['client_credentials'],
    permissions: ['shop.orders.read'],
  });
  policies.register(
    'owner',
    ({ subject, resource }) => subject !== null && (resource as { ownerId?: string }).ownerId === subject.id,
  );
  policies.registerConfig({ 'tenant-acme': { all: [{ path: 'request.headers.x-tenant', equals: 'acme' }] } });
  const tokens: Record<TokenName, string | undefined> = {
    none: undefined,
    alice: `Bearer ${await f.userToken(alice)}`,
    bob: `Bearer ${await f.userToken(bob)}`,
    carol: `Bearer ${await f.userToken(carol)}`,
    dave: `Bearer ${await f.userToken(dave)}`,
    svc: `Bearer ${await f.clientToken(svc)}`,
    garbage: 'Bearer abc.def.ghi',
    expired: `Bearer ${await f.userToken(alice, { ttlSec: -10 })}`,
    foreign: `Bearer ${await f.userToken(alice, { otherKey: true })}`,
    basic: `Basic ${Buffer.from('a:b').toString('base64')}`,
    empty: 'Bearer ',
  };
  await store.updateUser(dave.id, { isEnabled: false });
  return { ...f, users: { alice, bob, carol, dave }, svc, tokens };
}

type World = Awaited<ReturnType<typeof world>>;
type Send = (
  path: string,
  headers: Record<string, string>,
) => Promise<{ status: number; headers: Headers; body: string }>;

function checkRow(row: Row, res: { status: number; headers: Headers; body: string }) {
  assert.equal(res.status, row.status, res.body);
  const json = JSON.parse(res.body);
  if (row.status === 200) {
    assert.deepEqual(
      { isGranted: json.isGranted, reason: json.reason },
      { isGranted: true, reason: row.reason },
    );
    assert.equal(res.headers.get('www-authenticate'), null);
    return;
  }
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.deepEqual(json, {
    error: row.error,
    error_description: names.find((n) => R[n as keyof typeof R] === row.reason),
    permission: row.permission,
  });
  const expectedHeader =
    row.error === 'unauthorized'
      ? 'Bearer'
      : row.error === 'invalid_token'
        ? 'Bearer error="invalid_token"'
        : null;
  assert.equal(res.headers.get('www-authenticate'), expectedHeader);
}

function runTable(label: string, start: (w: World) => Promise<{ send: Send; close: () => Promise<void> }>) {
  describe(label, () => {
    let w: World;
    let send: Send;
    let close: () => Promise<void>;
    before(async () => {
      w = await world();
      ({ send, close } = await start(w));
    });
    after(() => close());

    test('reason table covers all twelve AuthorizationReason values', () => {
      const covered = new Set(rows('x').map((r) => r.reason));
      assert.equal(covered.size, 12);
    });

    for (const row of rows('{alice}')) {
      test(row.name, async () => {
        const path = row.path.replace('{alice}', w.users.alice.id);
        const token = w.tokens[row.token];
        const res = await send(path, { ...(token ? { authorization: token } : {}), ...row.headers });
        checkRow(row, res);
      });
    }
  });
}

function requirementFor(url: string): EndpointRequirement | undefined {
  const path = url.split('?')[0]!;
  if (path.startsWith('/owned/')) return routes['/owned/:ownerId'];
  return routes[path];
}

async function fastifyApp(
  w: World,
  onDenied?: Parameters<typeof authPlugin>[1]['onDenied'],
): Promise<FastifyInstance> {
  const app = Fastify();
  await app.register(authPlugin, { service: w.service, onDenied });
  for (const [path, auth] of Object.entries(routes)) {
    app.get(path, { config: { auth } }, async (request) => ({
      ...request.auth.decision,
      subject: request.auth.subject?.id ?? null,
    }));
  }
  app.get('/sod', { preHandler: app.authorize({ permission: 'shop.orders.read' }) }, async (request) => ({
    ...request.auth.decision,
    canDelete: request.auth.check('shop.orders.delete'),
    canAdmin: request.auth.check('auth.admin.users'),
  }));
  await app.ready();
  return app;
}

runTable('Fastify plugin', async (w) => {
  const app = await fastifyApp(w);
  return {
    send: async (url, headers) => {
      const res = await app.inject({ method: 'GET', url, headers });
      return {
        status: res.statusCode,
        headers: new Headers(res.headers as Record<string, string>),
        body: res.body,
      };
    },
    close: () => app.close(),
  };
});

async function nodeServer(
  w: World,
  onDenied?: Parameters<typeof createAuthMiddleware>[1] extends infer O
    ? O extends { onDenied?: infer D }
      ? D
      : never
    : never,
) {
  const middleware = createAuthMiddleware(w.service, {
    requirement: (req: IncomingMessage) => requirementFor(req.url ?? '/'),
    onDenied,
  });
  const server = createServer((req, res) => {
    const request = req as AuthorizedRequest;
    const path = (req.url ?? '/').split('?')[0]!;
    if (path.startsWith('/owned/'))
      request.params = { ownerId: decodeURIComponent(path.slice('/owned/'.length)) };
    middleware(req, res, (error) => {
      if (error) {
        res.statusCode = 500;
        res.end(String(error));
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ...request.auth!.decision, subject: request.auth!.subject?.id ?? null }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    send: (async (url, headers) => {
      const res = await fetch(`http://127.0.0.1:${port}${url}`, { headers });
      return { status: res.status, headers: res.headers, body: await res.text() };
    }) as Send,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

runTable('plain Node (req, res, next) adapter', (w) => nodeServer(w));

describe('security-stamp rule and context', () => {
  test('a token issued before a lock or a password reset is refused with SubjectDisabled, a new one works', async () => {
    const w = await world();
    const app = await fastifyApp(w);
    const get = (token: string) =>
      app.inject({ url: '/orders', headers: { authorization: `Bearer ${token}` } });
    const { alice } = w.users;
    const before = await w.userToken(alice);
    assert.equal((await get(before)).statusCode, 200);

    // lock (e.g. by the admin, or by failed logins): the old token is refused even after the lock ends
    await w.store.lockUser(alice.id, w.clock.now() + 60_000);
    const lockedRes = await get(before);
    assert.equal(lockedRes.statusCode, 403);
    assert.equal(lockedRes.json().error_description, 'SubjectDisabled');
    await w.store.unlockUser(alice.id);
    assert.equal((await get(before)).json().error_description, 'SubjectDisabled');

    // password reset rotates the stamp
    const fresh = await w.userToken((await w.store.getUser(alice.id))!);
    assert.equal((await get(fresh)).statusCode, 200);
    await w.store.setPasswordHash(alice.id, '$scrypt$new');
    assert.equal((await get(fresh)).json().error_description, 'SubjectDisabled');

    // re-enabling a disabled account does not revive tokens issued before the disable
    const dave = (await w.store.updateUser(w.users.dave.id, { isEnabled: true }))!;
    assert.equal((await get(w.tokens.dave!.slice(7))).json().error_description, 'SubjectDisabled');
    assert.equal((await get(await w.userToken(dave))).statusCode, 200);

    // a deleted user's token is an invalid credential; a disabled client gets SubjectDisabled
    await w.store.deleteUser(w.users.bob.id);
    const bobRes = await get(w.tokens.bob!.slice(7));
    assert.equal(bobRes.statusCode, 401);
    assert.equal(bobRes.headers['www-authenticate'], 'Bearer error="invalid_token"');
    await w.store.updateClient('svc', { isEnabled: false });
    assert.equal((await get(w.tokens.svc!.slice(7))).json().error_description, 'SubjectDisabled');
    await app.close();
  });

  test('request.auth.check answers further permission checks (deny wins) for separation-of-duties rules', async () => {
    const w = await world();
    const app = await fastifyApp(w);
    const res = await app.inject({ url: '/sod', headers: { authorization: w.tokens.carol! } });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), {
      isGranted: true,
      reason: R.Granted,
      canDelete: { isGranted: false, reason: R.DeniedByRule },
      canAdmin: { isGranted: false, reason: R.NoMatchingGrant },
    });
    const denied = await app.inject({ url: '/sod', headers: { authorization: w.tokens.bob! } });
    assert.equal(denied.statusCode, 403);
    assert.equal(denied.json().error_description, 'NoMatchingGrant');
    await app.close();
  });

  test('role and user changes take effect on the next request (compiled matcher cache invalidated)', async () => {
    const w = await world();
    const app = await fastifyApp(w);
    const get = (url: string) => app.inject({ url, headers: { authorization: w.tokens.bob! } });
    assert.equal((await get('/orders')).statusCode, 403);
    const reader = await w.store.createRole({ name: 'reader', permissions: ['shop.orders.read'] });
    await w.store.updateUser(w.users.bob.id, { roles: ['reader'] });
    assert.equal((await get('/orders')).statusCode, 200);
    await w.store.updateRole(reader.id, { deniedPermissions: ['shop.orders.read'] });
    assert.equal((await get('/orders')).json().error_description, 'DeniedByRule');
    await w.store.deleteRole(reader.id);
    assert.equal((await get('/orders')).json().error_description, 'NoMatchingGrant');
    await app.close();
  });

  test('OnDenied replaces the default body (Fastify and plain adapter); status and header stay', async () => {
    const w = await world();
    const app = await fastifyApp(w, (_request, reply, denied) => {
      reply.type('text/plain');
      return `custom ${denied.body.error_description} ${denied.decision.reason}`;
    });
    const res = await app.inject({ url: '/orders' });
    assert.equal(res.statusCode, 401);
    assert.equal(res.headers['www-authenticate'], 'Bearer');
    assert.equal(res.body, 'custom GuestNotAllowed 12');
    await app.close();

    const node = await nodeServer(w, (_req, res, denied) => {
      res.setHeader('content-type', 'application/problem+json');
      res.end(JSON.stringify({ title: denied.body.error_description, status: denied.status }));
    });
    const nodeRes = await node.send('/orders', { authorization: w.tokens.bob! });
    assert.equal(nodeRes.status, 403);
    assert.equal(nodeRes.headers.get('content-type'), 'application/problem+json');
    assert.deepEqual(JSON.parse(nodeRes.body), { title: 'NoMatchingGrant', status: 403 });
    await node.close();
  });
});
