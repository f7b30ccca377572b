/**
 * A 1 GiB file goes into a box with `copyIn` and comes back with `copyOut`, byte-identical, with bounded
 * memory. The client is a plain-JavaScript process importing the BUILT package (compiled here by tsc, as
 * a user installing it gets it; `files-large-client.mjs`), and its total peak RSS — Node, the SDK,
 * creating the box and the copy — stays under 100 MiB:
 * - on the local runtime (the image is in the store beforehand, as for any box after the first);
 * - over REST, against a server in a process of its own (as `sandbox serve` runs; `files-large-child.ts`).
 *   The server's peak RSS is printed, and the copy must raise it by less than 100 MiB (it is a server:
 *   Fastify, the runtime and the state database are resident before any copy).
 * Every measured process is a child, so that the peaks are the copy's, not this test runner's.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { BUSYBOX, cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

const SIZE_MIB = 1024;
const MAX_RSS_MIB = 100;
const PACKAGE = join(import.meta.dirname, '..');
const TSC = join(PACKAGE, '..', '..', 'node_modules', 'typescript', 'bin', 'tsc');
/** The package compiled for this test (not `dist/`, which packing writes); deps resolve from the repo. */
const BUILT = join(PACKAGE, '.tmp', `files-large-dist-${process.pid}`);
const run = promisify(execFile);
const work: string[] = [];

interface RoundTrip {
  sourceHash: string;
  backHash: string;
  sourceSize: number;
  backSize: number;
}

function assertIdentical(result: RoundTrip): void {
  assert.equal(result.sourceSize, SIZE_MIB * 1024 * 1024);
  assert.equal(result.backSize, result.sourceSize);
  assert.equal(result.backHash, result.sourceHash);
}

function workDir(): string {
  const dir = mkdtempSync('/tmp/sandbox-files-large-work-');
  work.push(dir);
  return dir;
}

const mib = (kib: number) => (kib / 1024).toFixed(1);

before(async () => {
  ensureRegistry();
  await run(
    process.execPath,
    [
      TSC,
      ...['-p', join(PACKAGE, 'tsconfig.build.json'), '--outDir', BUILT],
      // JavaScript only: types are the business of `npm run check`, not of a memory test.
      ...['--declaration', 'false', '--sourceMap', 'false', '--inlineSources', 'false', '--noCheck'],
    ],
    { maxBuffer: 1 << 20 },
  );
});

interface ClientResult extends RoundTrip {
  peaks: { start: number; imported: number; created: number; copied: number };
  serverPeaks?: { created: number; copied: number };
}

/** Runs the built client against `target` (homeDir or URL); the parsed result line. */
async function runClient(mode: 'local' | 'rest', target: string, serverPid?: number): Promise<ClientResult> {
  const client = join(import.meta.dirname, 'files-large-client.mjs');
  const sdk = join(BUILT, 'src', 'index.js');
  const args = [client, sdk, mode, target, workDir(), String(SIZE_MIB)];
  if (serverPid !== undefined) args.push(String(serverPid));
  const { stdout } = await run(process.execPath, args, { maxBuffer: 1 << 20 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as ClientResult;
}

/** Prints the client's peaks and asserts the total under the limit. */
function assertClientPeak(label: string, result: ClientResult): void {
  const { start, imported, created, copied } = result.peaks;
  console.log(
    `# ${label}: client peak RSS ${mib(copied)} MiB (Node ${mib(start)}, after the SDK import ${mib(imported)}, box created ${mib(created)})`,
  );
  assert.ok(
    copied / 1024 < MAX_RSS_MIB,
    `${label}: client peak RSS ${mib(copied)} MiB, limit ${MAX_RSS_MIB}`,
  );
}

describe('1 GiB copyIn/copyOut round trip with bounded memory', () => {
  it('local runtime: the built package peaks under 100 MiB of RSS in total', async () => {
    const home = tempHome('sandbox-files-large-');
    await testRuntime(home).images.pull(BUSYBOX);
    const result = await runClient('local', home);
    assertIdentical(result);
    assertClientPeak('local, built package', result);
  });

  it('REST runtime: the built package client peaks under 100 MiB in total; the server grows by less', async () => {
    const home = tempHome('sandbox-files-large-');
    const server = spawn(process.execPath, [join(import.meta.dirname, 'files-large-child.ts'), home], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    try {
      const lines = createInterface({ input: server.stdout! });
      const url = await new Promise<string>((resolve, reject) => {
        server.once('exit', (code) => reject(new Error(`the server exited with ${code}`)));
        lines.on('line', (line) => {
          if (line.startsWith('listening ')) resolve(line.slice('listening '.length));
        });
      });
      const result = await runClient('rest', url, server.pid!);
      assertIdentical(result);
      assertClientPeak('rest, built package', result);
      const { created, copied } = result.serverPeaks!;
      const growthMiB = (copied - created) / 1024;
      console.log(
        `# rest server: peak RSS ${mib(copied)} MiB (${mib(created)} before the copy, +${growthMiB.toFixed(1)})`,
      );
      assert.ok(
        growthMiB < MAX_RSS_MIB,
        `the copy raised the server's peak RSS by ${growthMiB.toFixed(1)} MiB, limit ${MAX_RSS_MIB}`,
      );
    } finally {
      server.kill('SIGTERM');
    }
  });
});

after(async () => {
  for (const dir of work) rmSync(dir, { recursive: true, force: true });
  rmSync(BUILT, { recursive: true, force: true });
  await cleanupAll();
});
