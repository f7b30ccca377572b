/**
 * Spec 001 "Errors › Token endpoint": one test per trigger of every row, each asserting the exact status,
 * the RFC 6749 §5.2 body, `Cache-Control: no-store`, `Pragma: no-cache`, and `WWW-Authenticate: Basic`
 * on `invalid_client`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ADMIN_PASSWORD,
  basic,
  DEMO_SECRET,
  obtainCode,
  postForm,
  serviceToken,
  startTestServer,
  type TestServer,
} from './oauth-fixtures.ts';

let t: TestServer;
before(async () => {
  t = await startTestServer();
  await t.createUser('alice', 'alice-password-1');
  await t.createClient({
    clientId: 'cc-only',
    clientType: 'confidential',
    secret: 'cc-only-secret-1',
    allowedGrantTypes: ['client_credentials'],
    allowedScopes: ['api'],
  });
  await t.createClient({
    clientId: 'disabled-client',
    clientType: 'confidential',
    secret: 'disabled-secret-1',
    isEnabled: false,
    allowedGrantTypes: ['client_credentials'],
  });
});
after(() => t.close());

/** Asserts a token-endpoint error response exactly. */
async function expectError(res: Response, status: number, error: string): Promise<string> {
  const text = await res.text();
  assert.equal(res.status, status, text);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  assert.equal(res.headers.get('pragma'), 'no-cache');
  const body = JSON.parse(text) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['error', 'error_description']);
  assert.equal(body.error, error);
  assert.equal(typeof body.error_description, 'string');
  if (error === 'invalid_client') assert.match(res.headers.get('www-authenticate') ?? '', /^Basic\b/);
  else assert.equal(res.headers.get('www-authenticate'), null);
  return body.error_description as string;
}

const token = (params: Record<string, string>) => serviceToken(t.base, params);
const password = (username: string, pw: string) => token({ grant_type: 'password', username, password: pw });
/** A token request authenticated with HTTP Basic as `clientId` / `secret`. */
const tokenAs = (clientId: string, secret: string, params: Record<string, string>) =>
  postForm(t.base, '/connect/token', params, { authorization: basic(clientId, secret) });
/** The refresh token of a successful password grant for `username` (as demo-service). */
const refreshTokenOf = async (username: string, pw: string) =>
  ((await (await password(username, pw)).json()) as { refresh_token: string }).refresh_token;
/** A refresh-token grant (as demo-service). */
const refresh = (refreshToken: string) => token({ grant_type: 'refresh_token', refresh_token: refreshToken });
/** The authorization-code exchange of the public client demo-spa; `verifier` omitted when undefined. */
const codeRequest = (code: string, verifier: string | undefined, redirectUri: string) => {
  const params: Record<string, string> = {
    grant_type: 'authorization_code',
    client_id: 'demo-spa',
    code,
    redirect_uri: redirectUri,
  };
  if (verifier !== undefined) params.code_verifier = verifier;
  return postForm(t.base, '/connect/token', params);
};
/** A refresh token issued to demo-spa (authorization code flow for alice). */
const spaRefreshToken = async () => {
  const { code, verifier, redirectUri } = await obtainCode(t.base, 'alice', 'alice-password-1');
  return ((await (await codeRequest(code, verifier, redirectUri)).json()) as { refresh_token: string })
    .refresh_token;
};

describe('invalid_request (400)', () => {
  test('body not form-urlencoded (JSON)', async () => {
    const res = await fetch(`${t.base}/connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: basic('demo-service', DEMO_SECRET) },
      body: JSON.stringify({ grant_type: 'client_credentials' }),
    });
    await expectError(res, 400, 'invalid_request');
  });
  test('body missing entirely', async () => {
    const res = await fetch(`${t.base}/connect/token`, { method: 'POST' });
    await expectError(res, 400, 'invalid_request');
  });
  for (const [name, params] of [
    ['missing grant_type', { scope: 'api' }],
    ['missing username (password grant)', { grant_type: 'password', password: 'x' }],
    ['missing password (password grant)', { grant_type: 'password', username: 'alice' }],
    ['missing refresh_token', { grant_type: 'refresh_token' }],
  ] as const) {
    test(name, async () => {
      await expectError(await token(params), 400, 'invalid_request');
    });
  }
  test('missing code', async () => {
    const res = await postForm(t.base, '/connect/token', {
      grant_type: 'authorization_code',
      client_id: 'demo-spa',
    });
    await expectError(res, 400, 'invalid_request');
  });
  test('malformed Basic header', async () => {
    for (const header of [
      'Basic !!!notbase64',
      `Basic ${Buffer.from('no-colon').toString('base64')}`,
      'Basic',
    ]) {
      const res = await postForm(
        t.base,
        '/connect/token',
        { grant_type: 'client_credentials' },
        { authorization: header },
      );
      await expectError(res, 400, 'invalid_request');
    }
  });
  test('oversized body: 413 in the OAuth error shape, with the no-store headers', async () => {
    const res = await serviceToken(t.base, { grant_type: 'client_credentials', scope: 'x'.repeat(20_000) });
    await expectError(res, 413, 'invalid_request');
  });
  test('repeated parameter (RFC 6749 §3.2)', async () => {
    const res = await fetch(`${t.base}/connect/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: basic('demo-service', DEMO_SECRET),
      },
      body: 'grant_type=client_credentials&grant_type=password',
    });
    await expectError(res, 400, 'invalid_request');
  });
});

describe('invalid_client (401, WWW-Authenticate: Basic)', () => {
  for (const [name, clientId, secret] of [
    ['client missing (unknown client_id)', 'nobody', 'x'],
    ['client disabled (correct secret)', 'disabled-client', 'disabled-secret-1'],
  ] as const) {
    test(name, async () => {
      await expectError(
        await tokenAs(clientId, secret, { grant_type: 'client_credentials' }),
        401,
        'invalid_client',
      );
    });
  }
  test('no credentials at all', async () => {
    await expectError(
      await postForm(t.base, '/connect/token', { grant_type: 'client_credentials' }),
      401,
      'invalid_client',
    );
  });
  test('confidential client without its secret', async () => {
    const res = await postForm(t.base, '/connect/token', {
      grant_type: 'client_credentials',
      client_id: 'demo-service',
    });
    await expectError(res, 401, 'invalid_client');
  });
  test('secret mismatch (Basic and form client_secret)', async () => {
    const viaBasic = await tokenAs('demo-service', 'wrong-secret', { grant_type: 'client_credentials' });
    await expectError(viaBasic, 401, 'invalid_client');
    const viaForm = await postForm(t.base, '/connect/token', {
      grant_type: 'client_credentials',
      client_id: 'demo-service',
      client_secret: 'wrong-secret',
    });
    await expectError(viaForm, 401, 'invalid_client');
  });
  test('a refused client is recorded in the audit log', async () => {
    const page = await t.server.store.listAudit({ category: 'Token', clientId: 'nobody' });
    assert.ok(page.items.some((e) => e.failureCode === 'invalid_client' && e.outcome === 'Denied'));
  });
});

describe('invalid_grant (400)', () => {
  test('password grant: unknown user, wrong password, disabled and locked accounts answer alike', async () => {
    await t.createUser('disabled-user', 'disabled-password-1');
    const disabled = await t.server.store.findUserByName('disabled-user');
    await t.server.store.updateUser(disabled!.id, { isEnabled: false });
    const locked = await t.createUser('locked-user', 'locked-password-1');
    await t.server.store.lockUser(locked.id, t.clock.now + 60_000);
    const descriptions = new Set<string>();
    for (const [user, pw] of [
      ['nobody-here', 'whatever-1'],
      ['alice', 'wrong-password'],
      ['disabled-user', 'disabled-password-1'],
      ['locked-user', 'locked-password-1'],
    ] as const) {
      descriptions.add(await expectError(await password(user, pw), 400, 'invalid_grant'));
    }
    assert.equal(descriptions.size, 1, 'the description must not reveal which case it was');
    // The real reasons are in the audit log only: spec 001 "Events", a failed credential validation is
    // Category `Login`, Outcome `Denied`, with the failure code; the client id marks the password grant.
    const codes = (
      await t.server.store.listAudit({
        category: 'Login',
        outcome: 'Denied',
        clientId: 'demo-service',
        limit: 100,
      })
    ).items.map((e) => e.failureCode);
    for (const code of ['invalid_credentials', 'account_disabled', 'locked_out'])
      assert.ok(codes.includes(code), code);
  });

  test('password grant: a successful credential validation is audited as Login / Success with the client id', async () => {
    const before = (await t.server.store.listAudit({ category: 'Login', outcome: 'Success', limit: 1 }))
      .total;
    const res = await password('alice', 'alice-password-1');
    assert.equal(res.status, 200);
    const page = await t.server.store.listAudit({ category: 'Login', outcome: 'Success', limit: 1 });
    assert.equal(page.total, before + 1);
    const event = page.items[0]!;
    assert.equal(event.clientId, 'demo-service');
    assert.equal(event.subjectName, 'alice');
    assert.equal(
      (await t.server.store.listAudit({ category: 'Token', outcome: 'Success', limit: 1 })).total,
      0,
      'credential validations are not recorded under Token',
    );
  });

  test('refresh token invalid (unknown)', async () => {
    await expectError(
      await token({ grant_type: 'refresh_token', refresh_token: 'not-a-token' }),
      400,
      'invalid_grant',
    );
  });

  test('refresh token expired', async () => {
    const issued = await refreshTokenOf('alice', 'alice-password-1');
    t.clock.now += 15 * 24 * 3600_000;
    try {
      await expectError(await refresh(issued), 400, 'invalid_grant');
    } finally {
      t.clock.now -= 15 * 24 * 3600_000;
    }
  });

  test('refresh token used (replayed) — and the family is revoked', async () => {
    const first = await refreshTokenOf('alice', 'alice-password-1');
    const rotated = await refresh(first);
    assert.equal(rotated.status, 200);
    const second = ((await rotated.json()) as { refresh_token: string }).refresh_token;
    await expectError(await refresh(first), 400, 'invalid_grant');
    // Reuse detection revoked the whole family: the successor is dead too.
    await expectError(await refresh(second), 400, 'invalid_grant');
  });

  test('the same refresh token sent concurrently: one rotation wins, the replays revoke the family', async () => {
    const first = await refreshTokenOf('alice', 'alice-password-1');
    const answers = await Promise.all(Array.from({ length: 5 }, () => refresh(first)));
    const winners = answers.filter((r) => r.status === 200);
    assert.equal(winners.length, 1, 'exactly one rotation succeeds');
    for (const loser of answers.filter((r) => r.status !== 200))
      await expectError(loser, 400, 'invalid_grant');
    const { refresh_token } = (await winners[0]!.json()) as { refresh_token: string };
    await expectError(await refresh(refresh_token), 400, 'invalid_grant');
  });

  test('refresh token of another client', async () => {
    const refresh_token = await spaRefreshToken();
    await expectError(await refresh(refresh_token), 400, 'invalid_grant');
  });

  test('authorization code invalid (unknown)', async () => {
    await expectError(
      await codeRequest('unknown-code', 'x'.repeat(43), 'http://127.0.0.1:8089/callback'),
      400,
      'invalid_grant',
    );
  });

  test('authorization code expired', async () => {
    const { code, verifier, redirectUri } = await obtainCode(t.base, 'alice', 'alice-password-1');
    t.clock.now += 61_000;
    try {
      await expectError(await codeRequest(code, verifier, redirectUri), 400, 'invalid_grant');
    } finally {
      t.clock.now -= 61_000;
    }
  });

  test('authorization code used twice — the tokens it produced are revoked', async () => {
    const { code, verifier, redirectUri } = await obtainCode(t.base, 'alice', 'alice-password-1');
    const first = await codeRequest(code, verifier, redirectUri);
    assert.equal(first.status, 200);
    const { refresh_token } = (await first.json()) as { refresh_token: string };
    await expectError(await codeRequest(code, verifier, redirectUri), 400, 'invalid_grant');
    const refresh = await postForm(t.base, '/connect/token', {
      grant_type: 'refresh_token',
      client_id: 'demo-spa',
      refresh_token,
    });
    await expectError(refresh, 400, 'invalid_grant');
  });

  test('authorization code not owned by the client', async () => {
    const { code, verifier, redirectUri } = await obtainCode(t.base, 'alice', 'alice-password-1');
    await t.server.store.updateClient('demo-service', {
      allowedGrantTypes: ['password', 'client_credentials', 'refresh_token', 'authorization_code'],
    });
    try {
      const res = await token({
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        redirect_uri: redirectUri,
      });
      await expectError(res, 400, 'invalid_grant');
    } finally {
      await t.server.store.updateClient('demo-service', {
        allowedGrantTypes: ['password', 'client_credentials', 'refresh_token'],
      });
    }
  });

  test('redirect_uri mismatch', async () => {
    const { code, verifier } = await obtainCode(t.base, 'alice', 'alice-password-1');
    await expectError(await codeRequest(code, verifier, 'http://127.0.0.1:8089/other'), 400, 'invalid_grant');
  });

  test('missing code_verifier', async () => {
    const { code, redirectUri } = await obtainCode(t.base, 'alice', 'alice-password-1');
    await expectError(await codeRequest(code, undefined, redirectUri), 400, 'invalid_grant');
  });

  test('failed PKCE check (wrong verifier)', async () => {
    const { code, redirectUri } = await obtainCode(t.base, 'alice', 'alice-password-1');
    await expectError(await codeRequest(code, 'w'.repeat(43), redirectUri), 400, 'invalid_grant');
  });

  test('user disabled after the code was issued', async () => {
    const bob = await t.createUser('bob', 'bob-password-1');
    const { code, verifier, redirectUri } = await obtainCode(t.base, 'bob', 'bob-password-1');
    await t.server.store.updateUser(bob.id, { isEnabled: false });
    await expectError(await codeRequest(code, verifier, redirectUri), 400, 'invalid_grant');
  });

  test('user disabled, or password reset, after the refresh token was issued', async () => {
    const carol = await t.createUser('carol', 'carol-password-1');
    const a = await refreshTokenOf('carol', 'carol-password-1');
    await t.server.store.updateUser(carol.id, { isEnabled: false });
    await expectError(await refresh(a), 400, 'invalid_grant');
    await t.server.store.updateUser(carol.id, { isEnabled: true });

    const b = await refreshTokenOf('carol', 'carol-password-1');
    await t.server.store.setPasswordHash(carol.id, await t.server.hasher.hash('carol-password-2'));
    await expectError(await refresh(b), 400, 'invalid_grant');
  });

  test('user deleted after the refresh token was issued', async () => {
    const dave = await t.createUser('dave', 'dave-password-1');
    const a = await refreshTokenOf('dave', 'dave-password-1');
    await t.server.store.deleteUser(dave.id);
    await expectError(await refresh(a), 400, 'invalid_grant');
  });
});

describe('unauthorized_client (400)', () => {
  test('AllowedGrantTypes lacks the requested grant type', async () => {
    const res = await tokenAs('cc-only', 'cc-only-secret-1', {
      grant_type: 'password',
      username: 'alice',
      password: 'alice-password-1',
    });
    await expectError(res, 400, 'unauthorized_client');
  });
  test('public client asks for client_credentials', async () => {
    await t.server.store.updateClient('demo-spa', {
      allowedGrantTypes: ['authorization_code', 'refresh_token', 'client_credentials'],
    });
    try {
      const res = await postForm(t.base, '/connect/token', {
        grant_type: 'client_credentials',
        client_id: 'demo-spa',
      });
      await expectError(res, 400, 'unauthorized_client');
    } finally {
      await t.server.store.updateClient('demo-spa', {
        allowedGrantTypes: ['authorization_code', 'refresh_token'],
      });
    }
  });
});

describe('unsupported_grant_type (400)', () => {
  test('grant type unknown to the server', async () => {
    await expectError(
      await token({ grant_type: 'urn:ietf:params:oauth:grant-type:saml2-bearer' }),
      400,
      'unsupported_grant_type',
    );
  });
  test('grant type not enabled on the server', async () => {
    const narrow = await startTestServer({ oauth: { grantTypes: ['client_credentials'] } });
    try {
      const res = await serviceToken(narrow.base, {
        grant_type: 'password',
        username: 'admin',
        password: ADMIN_PASSWORD,
      });
      await expectError(res, 400, 'unsupported_grant_type');
    } finally {
      await narrow.close();
    }
  });
});

describe('invalid_scope (400)', () => {
  test('requested scope exceeds AllowedScopes (client credentials and password)', async () => {
    await expectError(
      await token({ grant_type: 'client_credentials', scope: 'api admin' }),
      400,
      'invalid_scope',
    );
    await expectError(
      await token({
        grant_type: 'password',
        username: 'alice',
        password: 'alice-password-1',
        scope: 'openid secret',
      }),
      400,
      'invalid_scope',
    );
  });
  test('refresh asks for more than the original grant', async () => {
    const a = (await (
      await token({
        grant_type: 'password',
        username: 'alice',
        password: 'alice-password-1',
        scope: 'openid',
      })
    ).json()) as {
      refresh_token: string;
    };
    await expectError(
      await token({ grant_type: 'refresh_token', refresh_token: a.refresh_token, scope: 'openid api' }),
      400,
      'invalid_scope',
    );
  });
});

describe('successful responses carry the no-store headers too', () => {
  test('client credentials', async () => {
    const res = await token({ grant_type: 'client_credentials', scope: 'api' });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
    assert.equal(res.headers.get('pragma'), 'no-cache');
    const body = (await res.json()) as Record<string, unknown>;
    assert.equal(body.token_type, 'Bearer');
    assert.equal(body.scope, 'api');
    assert.equal(body.refresh_token, undefined, 'no refresh token for client credentials (RFC 6749 §4.4.3)');
  });
});

describe('revocation endpoint (RFC 7009)', () => {
  const revoke = (params: Record<string, string>) =>
    postForm(t.base, '/connect/revocation', params, { authorization: basic('demo-service', DEMO_SECRET) });

  test('missing token is invalid_request; a bad client is invalid_client', async () => {
    await expectError(await revoke({}), 400, 'invalid_request');
    const res = await postForm(
      t.base,
      '/connect/revocation',
      { token: 'x' },
      { authorization: basic('demo-service', 'wrong') },
    );
    await expectError(res, 401, 'invalid_client');
  });

  test('an unknown token answers 200 (nothing to reveal)', async () => {
    const res = await revoke({ token: 'no-such-token' });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('cache-control'), 'no-store');
  });

  test('a JWT access token is unsupported_token_type (revoke its refresh token instead)', async () => {
    const { access_token } = (await (await token({ grant_type: 'client_credentials' })).json()) as {
      access_token: string;
    };
    await expectError(await revoke({ token: access_token }), 400, 'unsupported_token_type');
  });

  test('another client’s refresh token is left alone', async () => {
    const refresh_token = await spaRefreshToken();
    assert.equal((await revoke({ token: refresh_token })).status, 200);
    const still = await postForm(t.base, '/connect/token', {
      grant_type: 'refresh_token',
      client_id: 'demo-spa',
      refresh_token,
    });
    assert.equal(still.status, 200, 'the owner can still use it');
  });
});
