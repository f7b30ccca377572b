/**
 * Every `AuthError` code maps to the HTTP status of `AUTH_ERROR_STATUS`, and the administration API's
 * error handler answers each error class with exactly that status, through a real Fastify server.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify from 'fastify';
import { adminErrorHandler } from '../src/admin/http.ts';
import { DpopProofError } from '../src/dpop-proof.ts';
import {
  AUTH_ERROR_STATUS,
  type AuthError,
  type AuthErrorCode,
  ConflictError,
  ConstraintError,
  InvalidTokenError,
  NotFoundError,
  ValidationError,
} from '../src/index.ts';

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
