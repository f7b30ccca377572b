/**
 * Opaque tokens (refresh tokens, authorization codes, session ids): 32 CSPRNG bytes each, base64url, never
 * repeated — also across the refills of the pooled random buffer `newOpaqueToken` draws from.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hashToken, newOpaqueToken } from '../src/oauth/tokens.ts';

test('1 000 opaque tokens (several refills of the random pool): 43 base64url characters, 32 bytes, all distinct', () => {
  const tokens = Array.from({ length: 1000 }, () => newOpaqueToken());
  for (const token of tokens) {
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(Buffer.from(token, 'base64url').length, 32);
  }
  assert.equal(new Set(tokens).size, tokens.length, 'no token is handed out twice');
  // No two tokens share their first 16 bytes either (slices of the pool never overlap).
  assert.equal(
    new Set(tokens.map((t) => Buffer.from(t, 'base64url').subarray(0, 16).toString('hex'))).size,
    1000,
  );
  // The stored form is the SHA-256 of the token, never the token.
  assert.match(hashToken(tokens[0]!), /^[A-Za-z0-9_-]{43}$/);
  assert.notEqual(hashToken(tokens[0]!), tokens[0]);
});
