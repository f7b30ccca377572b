/**
 * DPoP replay protection shared by server instances (RFC 9449 §11.1): two auth servers over one SQLite
 * file, one issuer. A proof accepted by one instance is refused by the other, at the token endpoint and in
 * the permission middleware of each.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ath, liveClock, makeProof, type ProofKey, proofKey, resourceServer } from './oauth-dpop-helpers.ts';
import { basic, DEMO_SECRET, postForm, startTestServer, type TestServer } from './oauth-fixtures.ts';

const ISSUER = 'https://as.example.test';
let dir: string;
let one: TestServer;
let two: TestServer;
let rs1: Awaited<ReturnType<typeof resourceServer>>;
let rs2: Awaited<ReturnType<typeof resourceServer>>;
let key: ProofKey;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'seed-dpop-'));
  const databasePath = join(dir, 'auth.sqlite');
  // Same file, same issuer: the proofs' htu names the issuer's token endpoint, whichever instance answers.
  one = await startTestServer({ store: undefined, databasePath, oauth: { issuer: ISSUER } });
  two = await startTestServer({ store: undefined, databasePath, oauth: { issuer: ISSUER } });
  liveClock(one.clock);
  liveClock(two.clock);
  await one.createUser('alice', 'alice-password-1', { directPermissions: ['shop.orders.read'] });
  rs1 = await resourceServer(one.server);
  rs2 = await resourceServer(two.server);
  key = await proofKey();
});
after(async () => {
  await rs1?.app.close();
  await rs2?.app.close();
  await one?.close();
  await two?.close();
  rmSync(dir, { recursive: true, force: true });
});

const tokenRequest = (server: TestServer, dpop: string) =>
  postForm(
    server.base,
    '/connect/token',
    { grant_type: 'password', username: 'alice', password: 'alice-password-1', scope: 'api' },
    { authorization: basic('demo-service', DEMO_SECRET), dpop },
  );

test('a token-endpoint proof used on one instance is refused by the other', async () => {
  const proof = await makeProof(key, { htu: `${ISSUER}/connect/token` });
  const first = await tokenRequest(one, proof);
  assert.equal(first.status, 200);
  assert.equal(((await first.json()) as { token_type: string }).token_type, 'DPoP');
  const replay = await tokenRequest(two, proof);
  assert.equal(replay.status, 400);
  const body = (await replay.json()) as { error: string; error_description: string };
  assert.equal(body.error, 'invalid_dpop_proof');
  assert.match(body.error_description, /already used/);
  // A fresh proof of the same key is fine on the second instance.
  const fresh = await tokenRequest(two, await makeProof(key, { htu: `${ISSUER}/connect/token` }));
  assert.equal(fresh.status, 200);
});

test("a resource-server proof accepted by one instance's middleware is refused by the other's", async () => {
  const issued = await tokenRequest(one, await makeProof(key, { htu: `${ISSUER}/connect/token` }));
  const token = ((await issued.json()) as { access_token: string }).access_token;
  // Both resource servers listen on their own port; the proof names one URL (htu) and is sent to both.
  const path = new URL(rs1.url).pathname;
  const htu = `http://resource.example.test${path}`;
  const proof = await makeProof(key, { htm: 'GET', htu, ath: ath(token) });
  const headers = { authorization: `DPoP ${token}`, dpop: proof, host: 'resource.example.test' };
  // node:http (fetch does not let the caller set Host).
  const send = (url: string) =>
    new Promise<{ status: number; challenge: string }>((resolve, reject) => {
      request(url, { headers }, (res) => {
        res.resume();
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, challenge: String(res.headers['www-authenticate'] ?? '') }),
        );
      })
        .on('error', reject)
        .end();
    });
  assert.equal((await send(rs1.url)).status, 200);
  const replay = await send(rs2.url);
  assert.equal(replay.status, 401);
  assert.match(replay.challenge, /^DPoP .*error="invalid_dpop_proof"/);
});
