/**
 * Permission middleware additions: audit events for denials of guests, the opt-in `access_token` query
 * parameter on WebSocket upgrade requests (RFC 6750 §2.3; never on plain HTTP requests), requirements
 * satisfied by alternative codes (`alsoGrantedBy`) and by any authenticated subject (`authenticated`).
 */
import assert from 'node:assert/strict';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { describe, test } from 'node:test';
import websocket from '@fastify/websocket';
import Fastify from 'fastify';
import { upgradeQueryToken } from '../src/authorization.ts';
import { authPlugin } from '../src/middleware/fastify.ts';
import { createAuthMiddleware } from '../src/middleware/node.ts';
import { AuthorizationReason } from '../src/reasons.ts';
import { fixture } from './helpers.ts';

describe('guest denials are audited', () => {
  test('GuestNotAllowed, a guest-role NoMatchingGrant and an invalid token each write one Authorization/Denied event', async () => {
    const f = await fixture({ auditDenials: true, guestRole: 'guest' });
    await f.store.createRole({ name: 'guest', permissions: ['shop.catalog.read'] });
    const request = { method: 'GET', url: '/orders?x=1', headers: {}, remoteAddress: '10.0.0.7' };
    const notAllowed = await f.service.authorize({
      requirement: { permission: 'shop.orders.read' },
      request,
    });
    assert.equal(notAllowed.decision.reason, AuthorizationReason.GuestNotAllowed);
    const noGrant = await f.service.authorize({
      requirement: { permission: 'shop.orders.read', allowGuest: true },
      request,
    });
    assert.equal(noGrant.decision.reason, AuthorizationReason.NoMatchingGrant);
    const allowed = await f.service.authorize({
      requirement: { permission: 'shop.catalog.read', allowGuest: true },
      request,
    });
    assert.equal(allowed.decision.reason, AuthorizationReason.GuestAllowed);
    const invalid = await f.service.authorize({
      authorization: 'Bearer not.a.jwt',
      requirement: { permission: 'shop.orders.read' },
      request,
    });
    assert.equal(invalid.decision.reason, AuthorizationReason.InvalidCredential);
    const events = (await f.store.listAudit({ category: 'Authorization' })).items.toReversed();
    assert.deepEqual(
      events.map((e) => [e.outcome, e.subjectId, e.failureCode, e.details?.permission, e.remoteAddress]),
      [
        ['Denied', null, 'GuestNotAllowed', 'shop.orders.read', '10.0.0.7'],
        ['Denied', null, 'NoMatchingGrant', 'shop.orders.read', '10.0.0.7'],
        ['Denied', null, 'InvalidCredential', null, '10.0.0.7'],
      ],
    );
    assert.equal(events[0]!.details?.url, '/orders?x=1');
  });

  test('nothing is written when auditDenials is off', async () => {
    const f = await fixture();
    await f.service.authorize({
      requirement: { permission: 'a.b' },
      request: { method: 'GET', url: '/', headers: {} },
    });
    assert.equal((await f.store.listAudit({ category: 'Authorization' })).total, 0);
  });
});

describe('upgradeQueryToken', () => {
  const ws = { upgrade: 'websocket', connection: 'Upgrade' };
  test('reads access_token only from a GET WebSocket upgrade without an Authorization header', () => {
    assert.equal(upgradeQueryToken('GET', ws, '/ws?access_token=abc.def'), 'Bearer abc.def');
    assert.equal(upgradeQueryToken('GET', { upgrade: 'WebSocket' }, '/ws?a=1&access_token=x'), 'Bearer x');
    assert.equal(upgradeQueryToken('GET', {}, '/ws?access_token=abc'), undefined, 'plain HTTP');
    assert.equal(upgradeQueryToken('POST', ws, '/ws?access_token=abc'), undefined);
    assert.equal(upgradeQueryToken('GET', { upgrade: 'h2c' }, '/ws?access_token=abc'), undefined);
    assert.equal(
      upgradeQueryToken('GET', { ...ws, authorization: 'Bearer y' }, '/ws?access_token=abc'),
      undefined,
      'the header wins',
    );
    assert.equal(upgradeQueryToken('GET', ws, '/ws'), undefined);
    assert.equal(
      upgradeQueryToken('GET', ws, '/ws?access_token=a&access_token=b'),
      'Bearer ',
      'two tokens: an invalid credential',
    );
  });
});

describe('WebSocket query token through the Fastify plugin', () => {
  async function server(queryTokenOnUpgrade: boolean) {
    const f = await fixture();
    const user = await f.store.createUser({ userName: 'wendy', directPermissions: ['chat.join'] });
    const app = Fastify();
    await app.register(websocket);
    await app.register(authPlugin, { service: f.service, queryTokenOnUpgrade });
    app.get('/chat', { websocket: true, config: { auth: { permission: 'chat.join' } } }, (socket, req) => {
      socket.send(`hello ${req.auth.subject?.name}`);
    });
    app.get(
      '/plain',
      { config: { auth: { permission: 'chat.join' } } },
      async (req) => req.auth.subject?.name,
    );
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    return { f, app, base, token: await f.userToken(user) };
  }

  /** Opens a WebSocket (Node's built-in client) and returns its first message, or `error`. */
  function firstMessage(url: string): Promise<string> {
    return new Promise((resolve) => {
      const socket = new WebSocket(url);
      socket.onmessage = (event) => {
        resolve(String(event.data));
        socket.close();
      };
      socket.onerror = () => resolve('error');
    });
  }

  test('opt-in: the upgrade authenticates with ?access_token=; a plain HTTP request does not', async () => {
    const { app, base, token } = await server(true);
    try {
      const wsBase = base.replace('http:', 'ws:');
      assert.equal(await firstMessage(`${wsBase}/chat?access_token=${token}`), 'hello wendy');
      assert.equal(await firstMessage(`${wsBase}/chat`), 'error', 'no token: refused');
      assert.equal(await firstMessage(`${wsBase}/chat?access_token=forged`), 'error');
      const plain = await fetch(`${base}/plain?access_token=${token}`);
      assert.equal(plain.status, 401);
      assert.deepEqual(await plain.json(), {
        error: 'unauthorized',
        error_description: 'GuestNotAllowed',
        permission: 'chat.join',
      });
      const header = await fetch(`${base}/plain`, { headers: { authorization: `Bearer ${token}` } });
      assert.equal(await header.text(), 'wendy');
    } finally {
      await app.close();
    }
  });

  test('off by default: the query token is ignored on upgrades too', async () => {
    const { app, base, token } = await server(false);
    try {
      assert.equal(await firstMessage(`${base.replace('http:', 'ws:')}/chat?access_token=${token}`), 'error');
    } finally {
      await app.close();
    }
  });
});

describe('WebSocket query token through the plain Node adapter', () => {
  /** Runs the middleware on a real IncomingMessage/ServerResponse pair; resolves `next` or the status. */
  function run(
    middleware: ReturnType<typeof createAuthMiddleware>,
    url: string,
    headers: Record<string, string>,
  ): Promise<string> {
    const req = new IncomingMessage(new Socket());
    req.method = 'GET';
    req.url = url;
    req.headers = headers;
    const res = new ServerResponse(req);
    return new Promise((resolve) => {
      res.end = (() => {
        resolve(`status ${res.statusCode}`);
        return res;
      }) as typeof res.end;
      middleware(req, res, (error) => resolve(error ? `error ${String(error)}` : 'next'));
    });
  }

  test('an upgrade passes with ?access_token= when opted in; plain requests and the default do not', async () => {
    const f = await fixture();
    const user = await f.store.createUser({ userName: 'nina', directPermissions: ['chat.join'] });
    const token = await f.userToken(user);
    const upgrade = { upgrade: 'websocket', connection: 'Upgrade' };
    const optedIn = createAuthMiddleware(f.service, {
      requirement: { permission: 'chat.join' },
      queryTokenOnUpgrade: true,
    });
    const byDefault = createAuthMiddleware(f.service, { requirement: { permission: 'chat.join' } });
    assert.equal(await run(optedIn, `/ws?access_token=${token}`, upgrade), 'next');
    assert.equal(await run(optedIn, `/ws?access_token=${token}`, {}), 'status 401');
    assert.equal(await run(optedIn, '/ws?access_token=forged', upgrade), 'status 401');
    assert.equal(await run(byDefault, `/ws?access_token=${token}`, upgrade), 'status 401');
  });
});

describe('alsoGrantedBy and authenticated requirements', () => {
  test('an alternative code grants unless the declared code is denied', async () => {
    const f = await fixture();
    const manager = await f.store.createUser({ userName: 'm', directPermissions: ['shop.orders.manage'] });
    const denied = await f.store.createUser({
      userName: 'd',
      directPermissions: ['shop.orders.manage'],
      deniedPermissions: ['shop.orders.read'],
    });
    const nobody = await f.store.createUser({ userName: 'n', directPermissions: ['shop.other'] });
    const requirement = { permission: 'shop.orders.read', alsoGrantedBy: ['shop.orders.manage'] };
    const request = { method: 'GET', url: '/', headers: {} };
    const run = async (user: typeof manager) =>
      (
        await f.service.authorize({
          authorization: `Bearer ${await f.userToken(user)}`,
          requirement,
          request,
        })
      ).decision.reason;
    assert.equal(await run(manager), AuthorizationReason.Granted);
    assert.equal(await run(denied), AuthorizationReason.DeniedByRule);
    assert.equal(await run(nobody), AuthorizationReason.NoMatchingGrant);
    const invalid = await f.service.authorize({
      authorization: `Bearer ${await f.userToken(manager)}`,
      requirement: { permission: 'shop.orders.read', alsoGrantedBy: ['shop.*'] },
      request,
    });
    assert.equal(invalid.decision.reason, AuthorizationReason.InvalidPermissionCode);
  });

  test('authenticated: any active subject passes, guests get GuestNotAllowed', async () => {
    const f = await fixture();
    const user = await f.store.createUser({ userName: 'plain' });
    const request = { method: 'GET', url: '/me', headers: {} };
    const ok = await f.service.authorize({
      authorization: `Bearer ${await f.userToken(user)}`,
      requirement: { authenticated: true },
      request,
    });
    assert.equal(ok.decision.reason, AuthorizationReason.Granted);
    assert.equal(ok.subject?.name, 'plain');
    const guest = await f.service.authorize({ requirement: { authenticated: true }, request });
    assert.equal(guest.decision.reason, AuthorizationReason.GuestNotAllowed);
    assert.equal(guest.denial?.status, 401);
  });
});
