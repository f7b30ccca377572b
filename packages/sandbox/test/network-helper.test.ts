/**
 * The network helper (`src/network/helper.ts`): a box's `allowNet` and secrets live in one helper
 * process per runtime home, not in the process that created the box. Real boxes (python:slim), real
 * servers on the host: an HTTP server on every interface (reached as `host.sandbox.internal`, allowed,
 * and by the host's own address, refused) and an HTTPS server checking the secret (it answers whether
 * the real value arrived, never the value). Shown: after the creator exits the box still resolves and
 * reaches what is allowed, is refused what is not, gets its secret injected and never sees it; with
 * the helper frozen the box fails closed; after the helper is SIGKILLed its restart serves the same
 * policy with the same CA; after `sandbox serve` is killed and started again the same holds over REST,
 * where `PUT`/`PATCH /v1/boxes/{box}/network` change the policy (documented in OpenAPI).
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer as httpServer, type Server } from 'node:http';
import { createServer as httpsServer } from 'node:https';
import { connect, createServer as netServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type JsBox, JsRuntime } from '../src/index.ts';
// internal: locates the network helper's process to check its life cycle
import { helperDir, helperPid } from '../src/network/helper-client.ts';
import { testPki } from './helpers/pki.ts';
import { cleanupAll, ensureRegistry, run, runtimeChild, seededHome, testRuntime } from './runtime-helpers.ts';

const SECRET = 'sk-helper-test-5c0ffee-real-value';
const IMAGE = 'python:slim';
const bin = join(import.meta.dirname, '..', 'bin', 'sandbox.ts');
/** The host's first non-loopback IPv4 address: a destination the boxes are refused unless named. */
const HOST_IP = Object.values(networkInterfaces())
  .flat()
  .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;

let home = '';
let plain: Server;
let tls: Server;
let plainPort = 0;
let tlsPort = 0;

before(async () => {
  ensureRegistry();
  assert.ok(HOST_IP, 'the host has a non-loopback IPv4 address');
  home = seededHome('sandbox-nethelper-');
  const pki = testPki();
  // The helper this home starts inherits this environment: the proxy verifies upstreams with this CA too.
  const caFile = join(home, 'test-ca.pem');
  writeFileSync(caFile, pki.caPem);
  process.env.NODE_EXTRA_CA_CERTS = caFile;
  plain = httpServer((req, res) => res.end(`hi ${req.url}`));
  await new Promise<void>((r) => plain.listen(0, '0.0.0.0', () => r()));
  plainPort = (plain.address() as { port: number }).port;
  tls = httpsServer({ key: pki.keyPem, cert: pki.certPem }, (req, res) =>
    res.end(req.headers.authorization === `Bearer ${SECRET}` ? 'secret ok' : 'secret missing'),
  );
  await new Promise<void>((r) => tls.listen(0, '127.0.0.1', () => r()));
  tlsPort = (tls.address() as { port: number }).port;
});

after(async () => {
  await cleanupAll();
  plain?.close();
  tls?.close();
});

/** What the box reaches: each value is the answer body or `ERR <exception>`. */
interface Probe {
  byName: string;
  byHostIp: string;
  unlistedName: string;
  secret: string;
  proxyToHostIp: string;
}

/** Runs the probe script in the box (python:slim); each request gives up after `timeoutS` seconds. */
async function probe(box: JsBox, timeoutS = 5): Promise<Probe> {
  const script = `
import json, os, urllib.request
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
def get(fn):
    try:
        return fn().read().decode()
    except Exception as e:
        return "ERR " + type(e).__name__ + " " + str(e)
out = {
    "byName": get(lambda: direct.open("http://host.sandbox.internal:${plainPort}/by-name", timeout=${timeoutS})),
    "byHostIp": get(lambda: direct.open("http://${HOST_IP}:${plainPort}/by-ip", timeout=${timeoutS})),
    "unlistedName": get(lambda: direct.open("http://unlisted.example.test:${plainPort}/", timeout=${timeoutS})),
    "secret": get(lambda: urllib.request.urlopen(urllib.request.Request(
        "https://host.sandbox.internal:${tlsPort}/secret",
        headers={"Authorization": "Bearer " + os.environ["API_KEY"]}), timeout=${timeoutS + 3})),
    "proxyToHostIp": get(lambda: urllib.request.urlopen("http://${HOST_IP}:${plainPort}/via-proxy", timeout=${timeoutS})),
}
print(json.dumps(out))`;
  const result = await run(box, 'python3', ['-c', script]);
  assert.equal(result.exitCode, 0, result.stderr);
  return JSON.parse(result.stdout) as Probe;
}

/** The box keeps exactly its policy: allowed by name, refused by address and name, secret injected. */
function assertPolicy(p: Probe): void {
  assert.equal(p.byName, 'hi /by-name', 'the listed name resolves and connects');
  assert.match(p.byHostIp, /^ERR .*(refused|reset)/i, 'an unlisted address is refused');
  assert.match(p.unlistedName, /^ERR /, 'an unlisted name does not resolve');
  assert.equal(p.secret, 'secret ok', 'the proxy injects the real value over verified TLS');
  assert.match(p.proxyToHostIp, /^ERR .*403/, 'the proxy refuses an unlisted destination');
}

/** The secret value is nowhere in the box: environment, files it could read. */
async function assertSecretUnseen(box: JsBox): Promise<void> {
  const env = await run(box, 'env');
  assert.match(env.stdout, /^API_KEY=<SECRET:API_KEY>$/m);
  const search = await run(box, 'sh', [
    '-c',
    `grep -rlsF -e '${SECRET}' /etc /root /tmp /proc/1/environ /proc/self/environ; echo done`,
  ]);
  assert.equal(search.stdout.trim(), 'done');
}

const OPTIONS = {
  image: IMAGE,
  detach: true,
  network: { mode: 'enabled' as const, allowNet: ['host.sandbox.internal'] },
  secrets: [{ name: 'API_KEY', value: SECRET, hosts: ['host.sandbox.internal'] }],
};

/** Runs `body` in a child process with `runtime` on `homeDir` ({@link runtimeChild}); resolves what it printed once it exits 0. */
async function inChild(homeDir: string, body: string): Promise<string> {
  const { code, stdout } = await runtimeChild(homeDir, body).exited;
  if (code !== 0) throw new Error(`child exited ${code}`);
  return stdout.trim();
}

/** Waits (bounded) until `check` holds. */
async function until(what: string, check: () => boolean, ms = 20_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); ) {
    if (Date.now() > end) assert.fail(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a detached box keeps its network policy without its creator', () => {
  let runtime: JsRuntime;
  let box: JsBox;
  const dir = () => helperDir(join(home, 'engine', 'net'));

  before(() => {
    runtime = testRuntime(home);
  });

  test('after the creating process exits: allowed, refused and the secret as created', async () => {
    const id = await inChild(
      home,
      `const box = await runtime.create(${JSON.stringify(OPTIONS)}); console.log(box.id); process.exit(0);`,
    );
    box = (await runtime.get(id))!;
    assert.ok(box, 'the box outlives its creator');
    assertPolicy(await probe(box));
    await assertSecretUnseen(box);
    const state = readFileSync(join(dir(), 'boxes', `${id}.json`), 'utf8');
    assert.ok(state.includes('host.sandbox.internal'), 'the helper keeps the policy on disk');
  });

  test('the control socket refuses malformed and oversized requests and keeps serving', async () => {
    const ask = (payload: string) =>
      new Promise<Record<string, unknown>>((resolve, reject) => {
        const socket = connect(join(dir(), 'sock'));
        let data = '';
        socket.on('data', (c) => {
          data += c;
        });
        // An oversized request is answered while the rest is still being written: the write may
        // then fail (reset), after the answer arrived.
        socket.on('error', () => {});
        socket.on('close', () => {
          try {
            resolve(JSON.parse(data));
          } catch {
            reject(new Error(`no answer: ${JSON.stringify(data)}`));
          }
        });
        socket.end(payload);
      });
    assert.deepEqual(await ask('not json\n'), {
      ok: false,
      code: 'invalid_option',
      field: 'body',
      message: 'invalid network helper request body: must be JSON',
    });
    const unknownBox = await ask(`${JSON.stringify({ op: 'update', id: 'nosuchbox', allowNet: [] })}\n`);
    assert.equal(unknownBox.code, 'not_found');
    const badId = await ask(`${JSON.stringify({ op: 'remove', id: '../escape' })}\n`);
    assert.equal(badId.field, 'id');
    const huge = await ask('x'.repeat(2 * 1024 * 1024));
    assert.equal(huge.field, 'body');
    assert.deepEqual(await ask('{"op":"ping"}\n'), { ok: true });
    assertPolicy(await probe(box));
  });

  test('helper frozen: names fail closed; helper SIGKILLed: restarted with the same policy and CA', async () => {
    const pid = helperPid(dir());
    assert.ok(pid, 'a helper runs');
    process.kill(pid, 'SIGSTOP');
    try {
      const frozen = await probe(box, 1);
      assert.match(frozen.byName, /^ERR /, 'no resolver: the name does not resolve (fail closed)');
      assert.match(frozen.byHostIp, /^ERR /, 'refused stays refused');
      assert.notEqual(frozen.secret, 'secret ok', 'no proxy: nothing goes out with the secret');
    } finally {
      process.kill(pid, 'SIGKILL');
    }
    await until('a new helper serves', () => {
      const next = helperPid(dir());
      return next !== null && next !== pid;
    });
    assertPolicy(await probe(box));
    await assertSecretUnseen(box);
  });

  test('sandbox serve killed and started again: same policy over REST; PUT and PATCH /network change it', async () => {
    const port = await new Promise<number>((resolve) => {
      const s = netServer().listen(0, '127.0.0.1', () => {
        const { port } = s.address() as { port: number };
        s.close(() => resolve(port));
      });
    });
    const url = `http://127.0.0.1:${port}`;
    const serve = async (): Promise<ChildProcess> => {
      const proc = spawn(
        process.execPath,
        [bin, '--home', home, '--registry', 'http://127.0.0.1:5000', 'serve', '--port', String(port)],
        { stdio: 'ignore', env: { ...process.env, SANDBOX_API_KEY: '' } },
      );
      for (let i = 0; i < 300; i++) {
        if (
          await fetch(`${url}/v1/config`).then(
            (r) => r.ok,
            () => false,
          )
        )
          return proc;
        await new Promise((r) => setTimeout(r, 100));
      }
      proc.kill('SIGKILL');
      throw new Error('sandbox serve did not answer');
    };
    const kill = async (proc: ChildProcess) => {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGKILL');
      await exited;
    };
    let server = await serve();
    try {
      const rest = JsRuntime.rest({ url });
      const remote = await rest.create(OPTIONS);
      assertPolicy(await probe(remote));
      await kill(server);
      server = await serve();
      const again = (await JsRuntime.rest({ url }).get(remote.id))!;
      assertPolicy(await probe(again));
      await assertSecretUnseen(again);

      const updated = await again.network.update({ allowNet: [HOST_IP!] });
      assert.deepEqual(updated, { allowNet: [HOST_IP] });
      const swapped = await probe(again);
      assert.equal(swapped.byHostIp, 'hi /by-ip', 'the newly allowed address connects');
      assert.match(swapped.byName, /^ERR /, 'the name no longer allowed does not resolve');
      assert.deepEqual((await again.info()).network!.allowNet, [HOST_IP]);

      const patched = await fetch(`${url}/v1/boxes/${again.id}/network`, {
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ allow_net: ['host.sandbox.internal'] }),
      });
      assert.equal(patched.status, 200);
      assert.deepEqual(await patched.json(), { allow_net: ['host.sandbox.internal'] });
      assertPolicy(await probe(again));

      const bad = await fetch(`${url}/v1/boxes/${again.id}/network`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ allow_net: ['not a rule'] }),
      });
      assert.equal(bad.status, 400);
      const refusal = (await bad.json()) as { error: { code: string; field?: string } };
      assert.equal(refusal.error.code, 'invalid_option');
      assert.equal(refusal.error.field, 'network.allowNet[0]');
      assert.equal((await probe(again)).byName, 'hi /by-name', 'a refused update changes nothing');

      const doc = (await (await fetch(`${url}/v1/openapi.json`)).json()) as {
        paths: Record<string, Record<string, unknown>>;
      };
      const documented = doc.paths['/v1/boxes/{box}/network'];
      assert.ok(documented?.put && documented.patch, 'PUT and PATCH /v1/boxes/{box}/network are documented');
      await rest.remove(remote.id, true);
    } finally {
      await kill(server);
    }
  });
});
