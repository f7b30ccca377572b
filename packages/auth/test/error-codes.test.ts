/**
 * Every `AuthError` code maps to the HTTP status of `AUTH_ERROR_STATUS`, and the administration API's
 * error handler answers each error class with exactly that status, through a real Fastify server. Every
 * `AdminErrorCode` has its status in `ADMIN_ERROR_STATUS`, and each code a route can emit is answered with it
 * by a real administration API.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { adminErrorHandler, frameworkErrorCode } from '../src/admin/http.ts';
import { DpopProofError } from '../src/dpop-proof.ts';
import {
  ADMIN_ERROR_STATUS,
  type AdminErrorCode,
  AdminHttpError,
  AUTH_ERROR_STATUS,
  type AuthError,
  type AuthErrorCode,
  ConflictError,
  ConstraintError,
  InvalidTokenError,
  NotFoundError,
  SeparationOfDutiesError,
  ValidationError,
} from '../src/index.ts';
import { ADMINISTRATOR_ROLE_ID } from '../src/store/migrations.ts';
import { adminFixture } from './admin-fixture.ts';

/** One error of every class, with the code and status the README's "Errors" table documents. */
const CASES: [AuthError, AuthErrorCode, number][] = [
  [new ValidationError('userName', 'required'), 'validation', 400],
  [new ConstraintError('system_role', 'system roles cannot be deleted'), 'constraint', 400],
  [new InvalidTokenError('token expired'), 'invalid_token', 401],
  [new DpopProofError('invalid_dpop_proof', 'proof replayed'), 'invalid_token', 401],
  [new NotFoundError('user', 'u-1'), 'not_found', 404],
  [new ConflictError('user', 'userName', 'alice'), 'conflict', 409],
];

describe('AuthError codes', () => {
  it('each class carries its documented code, and the table gives its documented status', () => {
    for (const [error, code, status] of CASES) {
      assert.equal(error.code, code, error.name);
      assert.equal(AUTH_ERROR_STATUS[error.code], status, code);
    }
    const covered = new Set(CASES.map(([, code]) => code));
    assert.deepEqual([...covered].sort(), Object.keys(AUTH_ERROR_STATUS).sort());
  });

  it('the administration API answers each error with its code’s status and message', async () => {
    const app = Fastify();
    app.setErrorHandler(adminErrorHandler);
    let next: AuthError = CASES[0]![0];
    app.get('/throw', async () => {
      throw next;
    });
    try {
      for (const [error, code] of CASES) {
        next = error;
        const res = await app.inject({ method: 'GET', url: '/throw' });
        assert.equal(res.statusCode, AUTH_ERROR_STATUS[code], `${error.name} (${code})`);
        assert.deepEqual(res.json(), { error: error.message });
      }
    } finally {
      await app.close();
    }
  });
});

describe('AdminErrorCode', () => {
  /** The status of each code as the README's "Errors" table documents it. */
  const DOCUMENTED: Record<AdminErrorCode, number> = {
    validation: 400,
    constraint: 400,
    invalid_token: 401,
    separation_of_duties: 403,
    not_found: 404,
    conflict: 409,
    payload_too_large: 413,
    uri_too_long: 414,
    internal: 500,
  };

  it('the table gives each code its documented status and keeps the core codes', () => {
    assert.deepEqual({ ...ADMIN_ERROR_STATUS }, DOCUMENTED);
    for (const [code, status] of Object.entries(AUTH_ERROR_STATUS))
      assert.equal(ADMIN_ERROR_STATUS[code as AdminErrorCode], status, code);
    const sod = new SeparationOfDutiesError('roles', 'auth.admin.roles');
    assert.equal(sod.code, 'separation_of_duties');
    assert.equal(sod.statusCode, 403);
    for (const code of Object.keys(DOCUMENTED) as AdminErrorCode[])
      assert.equal(new AdminHttpError(code, 'x').statusCode, DOCUMENTED[code], code);
    assert.equal(
      frameworkErrorCode({ statusCode: 413, code: 'FST_ERR_CTP_BODY_TOO_LARGE' }),
      'payload_too_large',
    );
    assert.equal(frameworkErrorCode({ statusCode: 414 }), 'uri_too_long');
    assert.equal(frameworkErrorCode({ statusCode: 400, code: 'FST_ERR_BAD_URL' }), 'validation');
  });

  it('a real administration API answers each code a route can emit with its status and `{ error }`', async () => {
    const f = await adminFixture();
    try {
      const root = (await f.caller('root', ['auth.admin.**'])).token;
      const usersOnly = (await f.caller('users-only', ['auth.admin.users'])).token;
      await f.store.createUser({ userName: 'taken' });
      const bigBody = JSON.stringify({ userName: 'x', password: 'p'.repeat(2 * 1024 * 1024) });
      const cases: [AdminErrorCode, ReturnType<typeof f.call>][] = [
        ['validation', f.call(root, 'POST', 'users', {})],
        ['constraint', f.call(root, 'DELETE', `roles/${ADMINISTRATOR_ROLE_ID}`)],
        [
          'separation_of_duties',
          f.call(usersOnly, 'POST', 'users', { userName: 'n', roles: ['Administrator'] }),
        ],
        ['not_found', f.call(root, 'GET', 'users/00000000-0000-4000-8000-000000000000')],
        ['not_found', f.call(root, 'GET', 'no-such-route')],
        ['conflict', f.call(root, 'POST', 'users', { userName: 'taken' })],
        ['payload_too_large', f.call(root, 'POST', 'users', bigBody, { 'content-type': 'application/json' })],
        ['uri_too_long', f.call(root, 'GET', `permissions/${'a'.repeat(300)}`)],
      ];
      for (const [code, pending] of cases) {
        const res = await pending;
        assert.equal(res.statusCode, ADMIN_ERROR_STATUS[code], `${code}: ${res.body}`);
        const body = res.json();
        assert.deepEqual(Object.keys(body), ['error'], code);
        assert.equal(typeof body.error, 'string');
      }
    } finally {
      await f.close();
    }
  });
});
