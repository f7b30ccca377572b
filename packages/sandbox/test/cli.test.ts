/**
 * The `sandbox` command (issue 8 "CLI"): run (with --rm, -e, -v, --cpus, --memory, -i), ps, exec, stop,
 * rm, pull, images; exit codes pass the command's own; usage errors exit 2, SDK errors 125.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BUSYBOX, boxDirs, cleanupAll, ensureRegistry, tempHome } from './runtime-helpers.ts';

const bin = join(import.meta.dirname, '..', 'bin', 'sandbox.ts');

describe('sandbox CLI', () => {
  let home: string;

  function sandbox(
    args: string[],
    input?: string,
  ): { status: number | null; stdout: string; stderr: string } {
    const result = spawnSync(
      process.execPath,
      [bin, '--home', home, '--registry', 'http://127.0.0.1:5000', ...args],
      {
        encoding: 'utf8',
        input: input ?? '',
        timeout: 60_000,
      },
    );
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  before(() => {
    ensureRegistry();
    home = tempHome('sandbox-cli-');
  });

  it('pull shows progress and images lists the image', () => {
    const pull = sandbox(['pull', BUSYBOX]);
    assert.equal(pull.status, 0, pull.stderr);
    assert.match(pull.stdout, /^127\.0\.0\.1:5000\/library\/busybox:latest sha256:[0-9a-f]{64}\n$/);
    assert.match(pull.stderr, /busybox:latest/);
    const images = sandbox(['images']);
    assert.equal(images.status, 0);
    assert.match(
      images.stdout,
      /^REFERENCE\s+DIGEST\s+SIZE\n127\.0\.0\.1:5000\/library\/busybox:latest\s+sha256:/,
    );
    assert.equal(sandbox(['images', '-q']).stdout, '127.0.0.1:5000/library/busybox:latest\n');
  });

  it('run --rm passes output and the exit code, and leaves no box', () => {
    const r = sandbox(['run', '--rm', BUSYBOX, '--', 'sh', '-c', 'echo out; echo err >&2; exit 7']);
    assert.equal(r.status, 7);
    assert.equal(r.stdout, 'out\n');
    assert.match(r.stderr, /^err$/m);
    assert.equal(sandbox(['ps', '-q']).stdout, '');
    assert.deepEqual(boxDirs(home), []);
  });

  it('run with -e, -v, --cpus, --memory, --name keeps a box for exec, stop and rm', () => {
    const dir = tempHome('sandbox-cli-vol-');
    writeFileSync(join(dir, 'in'), 'host file\n');
    const created = sandbox([
      'run',
      '-e',
      'GREETING=hi there',
      '-v',
      `${dir}:/data`,
      '--cpus',
      '0.5',
      '--memory',
      '256m',
      '--name',
      'cli-box',
      BUSYBOX,
    ]);
    assert.equal(created.status, 0, created.stderr);
    const id = created.stdout.trim();
    assert.match(id, /^[0-9A-HJKMNP-TV-Z]{26}$/);

    const ps = sandbox(['ps']);
    assert.match(ps.stdout, /^ID\s+NAME\s+STATUS\s+IMAGE\s+CPUS\s+MEMORY\s+CREATED$/m);
    assert.match(
      ps.stdout,
      new RegExp(`^${id}\\s+cli-box\\s+running\\s+busybox:latest\\s+0\\.5\\s+256 MiB`, 'm'),
    );
    const json = JSON.parse(sandbox(['ps', '--json']).stdout);
    assert.equal(json[0].id, id);
    assert.equal(json[0].memoryMib, 256);

    const exec = sandbox([
      'exec',
      'cli-box',
      '--',
      'sh',
      '-c',
      'echo "$GREETING"; cat /data/in; echo new > /data/out',
    ]);
    assert.equal(exec.status, 0, exec.stderr);
    assert.equal(exec.stdout, 'hi there\nhost file\n');
    assert.equal(readFileSync(join(dir, 'out'), 'utf8'), 'new\n');
    assert.equal(sandbox(['exec', 'cli-box', '--', 'sh', '-c', 'exit 3']).status, 3);
    const withOptions = sandbox([
      'exec',
      '-e',
      'X=1',
      '-w',
      '/tmp',
      '-u',
      '65534',
      id,
      '--',
      'sh',
      '-c',
      'echo $X $(pwd) $(id -u)',
    ]);
    assert.equal(withOptions.stdout, '1 /tmp 65534\n');
    const piped = sandbox(['exec', '-i', 'cli-box', '--', 'wc', '-l'], 'a\nb\nc\n');
    assert.equal(piped.stdout.trim(), '3');

    const rmRunning = sandbox(['rm', 'cli-box']);
    assert.equal(rmRunning.status, 125);
    assert.match(rmRunning.stderr, /running; stop it first/);
    assert.equal(sandbox(['stop', 'cli-box']).status, 0);
    assert.match(sandbox(['ps']).stdout, /cli-box\s+stopped/);
    assert.equal(sandbox(['exec', 'cli-box', '--', 'true']).status, 125);
    assert.equal(sandbox(['rm', 'cli-box']).status, 0);
    assert.equal(sandbox(['ps', '-q']).stdout, '');
  });

  it('run -i forwards stdin; rm -f removes a running box', () => {
    const r = sandbox(['run', '--rm', '-i', BUSYBOX, '--', 'tr', 'a-z', 'A-Z'], 'shout\n');
    assert.equal(r.status, 0);
    assert.equal(r.stdout, 'SHOUT\n');
    const id = sandbox(['run', BUSYBOX]).stdout.trim();
    assert.equal(sandbox(['rm', '-f', id]).status, 0);
    assert.equal(sandbox(['ps', '-q']).stdout, '');
  });

  it('run against a REST runtime (SANDBOX_URL): the server pulls the image and runs the command', async () => {
    // Port 0: the server binds a port the kernel picks and prints its URL (a port probed free and
    // passed in could be bound meanwhile by another test file's server, which would then answer here).
    const server = spawn(
      process.execPath,
      [bin, '--home', home, '--registry', 'http://127.0.0.1:5000', 'serve', '--port', '0'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    try {
      // The server loads the runtime from source first: seconds on a loaded machine.
      const url = await new Promise<string>((resolve, reject) => {
        let stderr = '';
        const timer = setTimeout(() => reject(new Error(`serve printed no URL in 30 s: ${stderr}`)), 30_000);
        server.once('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
        server.stderr.setEncoding('utf8').on('data', (chunk: string) => {
          stderr += chunk;
          const printed = /REST runtime on (http:\/\/\S+)\/v1 /.exec(stderr);
          if (!printed) return;
          clearTimeout(timer);
          server.stderr.resume().removeAllListeners('data');
          resolve(printed[1]!);
        });
      });
      const env = { ...process.env, SANDBOX_URL: url, SANDBOX_API_KEY: '', SANDBOX_HOME: '' };
      const r = spawnSync(
        process.execPath,
        [bin, 'run', '--rm', BUSYBOX, '--', 'sh', '-c', 'echo remote; exit 3'],
        {
          encoding: 'utf8',
          env,
          timeout: 60_000,
        },
      );
      assert.equal(r.status, 3, r.stderr);
      assert.equal(r.stdout, 'remote\n');
    } finally {
      if (server.exitCode === null && server.signalCode === null) {
        const exited = new Promise((r) => server.once('exit', r));
        server.kill('SIGTERM');
        await exited;
      }
    }
  });

  it('errors: usage exits 2, SDK errors 125 with a message naming the problem', () => {
    assert.equal(sandbox(['bogus']).status, 2);
    assert.equal(sandbox(['run', '--memory', 'lots', BUSYBOX]).status, 2);
    const missing = sandbox(['exec', 'no-such-box', '--', 'true']);
    assert.equal(missing.status, 125);
    assert.match(missing.stderr, /no box with id or name 'no-such-box'/);
    const badVolume = sandbox(['run', '--rm', '-v', '/no/such/dir:/x', BUSYBOX, '--', 'true']);
    assert.equal(badVolume.status, 125);
    assert.match(badVolume.stderr, /volumes\[0\]\.hostPath/);
    const badImage = sandbox(['run', '--rm', '127.0.0.1:5000/nope/none:1', '--', 'true']);
    assert.equal(badImage.status, 125);
    assert.match(badImage.stderr, /nope\/none/);
  });
});

after(cleanupAll);
