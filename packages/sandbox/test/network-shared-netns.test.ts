/**
 * Network-enabled boxes on a host whose `/run/netns` is a shared mount (as after any `ip netns add`,
 * common with Docker or CNI). The box runs in a child process that lives in a mount namespace of its
 * own, where `/run/netns` is bind-mounted on itself and made shared: the host's mount table and its
 * propagation are never touched. The box must reach an allowed destination (a server on the host's
 * loopback) and leave no gateway namespace behind, neither as a file nor as a mount.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { BUSYBOX, cleanupAll, ensureRegistry, REGISTRIES, seededHome } from './runtime-helpers.ts';

let server: Server;
let port = 0;
let home = '';

before(async () => {
  ensureRegistry();
  home = seededHome('sandbox-sharednetns-');
  server = createServer((_req, res) => res.end('reached\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});
after(async () => {
  server.close();
  await cleanupAll();
});

/** Runs `source` (an ES module) in a child Node process in its own mount namespace with `/run/netns` shared. */
function inSharedNetnsChild(
  source: string,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const setup = [
    'set -e',
    'mkdir -p /run/netns',
    'mount --bind /run/netns /run/netns',
    'mount --make-shared /run/netns',
    'grep " /run/netns " /proc/self/mountinfo',
    'exec "$0" --conditions=seed-source --input-type=module -e "$1"',
  ].join('\n');
  const child = spawn(
    'unshare',
    ['--mount', '--propagation', 'private', '--', 'sh', '-c', setup, process.execPath, source],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c));
  child.stderr.on('data', (c: Buffer) => (stderr += c));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}

test('a network-enabled box reaches an allowed destination with /run/netns shared; nothing is left on the host', async () => {
  const source = `
    import { JsRuntime } from ${JSON.stringify(join(import.meta.dirname, '..', 'src', 'index.ts'))};
    const runtime = new JsRuntime({ homeDir: ${JSON.stringify(home)}, imageRegistries: ${JSON.stringify(REGISTRIES)} });
    const box = await runtime.create({ image: ${JSON.stringify(BUSYBOX)}, network: { mode: 'enabled', allowNet: ['host.sandbox.internal'] } });
    console.log('ID ' + box.id);
    const execution = await box.exec('sh', ['-c', "printf 'GET / HTTP/1.0\\\\r\\\\n\\\\r\\\\n' | nc -w 5 10.0.2.2 ${port}"]);
    const out = await execution.stdout();
    for (let line = await out.next(); line !== null; line = await out.next()) console.log('BOX ' + line);
    console.log('EXIT ' + (await execution.wait()).exitCode);
    await runtime.remove(box.id, true);`;
  const { code, stdout, stderr } = await inSharedNetnsChild(source);
  // The condition under test held in the child: its /run/netns was a shared mount.
  assert.match(stdout.split('\n')[0] ?? '', / \/run\/netns .* shared:\d+/, stdout);
  assert.equal(code, 0, `child failed:\n${stdout}\n${stderr}`);
  assert.match(stdout, /^BOX reached$/m);
  assert.match(stdout, /^EXIT 0$/m);
  const id = /^ID (\S+)$/m.exec(stdout)?.[1];
  assert.ok(id, stdout);
  // Nothing of the box's gateway is left on the host: no namespace file, no mount, no state file.
  assert.equal(existsSync(join('/run/netns', `sbx-${id}`)), false);
  assert.equal(readFileSync('/proc/self/mountinfo', 'utf8').includes(`sbx-${id}`), false);
  const netDir = join(home, 'engine', 'net');
  assert.deepEqual(existsSync(netDir) ? readdirSync(netDir).filter((f) => f.startsWith(id)) : [], []);
});
