/**
 * Opaque tokens (refresh tokens, authorization codes, session ids): 32 CSPRNG bytes each, base64url, never
 * repeated — also across the refills of the pooled random buffer `newOpaqueToken` draws from. Refresh
 * tokens carry their issue time in front, so that their stored keys sort by time.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hashRefreshToken, hashToken, newOpaqueToken, newRefreshToken } from '../src/oauth/tokens.ts';

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

test('refresh tokens: issue-time prefix, 256 secret bits; stored keys sort by issue time and never contain the token', () => {
  const t1 = Date.UTC(2026, 10, 24, 7, 0, 0);
  const first = newRefreshToken(t1);
  const second = newRefreshToken(t1 + 1);
  assert.match(first, /^[0-9a-f]{12}\.[A-Za-z0-9_-]{43}$/);
  assert.equal(Number.parseInt(first.slice(0, 12), 16), t1);
  assert.equal(Buffer.from(first.slice(13), 'base64url').length, 32);
  const [k1, k2] = [hashRefreshToken(first), hashRefreshToken(second)];
  assert.equal(k1, `${first.slice(0, 12)}.${hashToken(first)}`);
  assert.ok(k1 < k2, 'a later token gets a larger key (right edge of the index)');
  assert.ok(!k1.includes(first.slice(13)), 'the secret part is not stored');
  // A token of the older, prefix-less format and anything else map to the bare digest.
  const old = newOpaqueToken();
  assert.equal(hashRefreshToken(old), hashToken(old));
  assert.equal(hashRefreshToken('0.x'), hashToken('0.x'));
  // Same secret part, other prefix: another key (the prefix is hashed with the rest).
  const forged = `${'f'.repeat(12)}${first.slice(12)}`;
  assert.notEqual(hashRefreshToken(forged).slice(13), k1.slice(13));
});
