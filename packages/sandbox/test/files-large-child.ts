/**
 * Child process of `files-large.test.ts`: makes a host file of `SIZE_MIB` MiB (random bytes, by `dd`),
 * copies it into a box with `copyIn` and back out with `copyOut` on the local runtime or over REST, and
 * prints one JSON line: SHA-256 of both host files, their sizes, and peak RSS (KiB) of the processes
 * involved before and after the copy. Over REST the server runs in a process of its own (as `sandbox
 * serve` does), started by this script with `serve`, so that client and server are measured apart.
 * Usage: node files-large-child.ts <local|rest> <homeDir> <workDir> <sizeMiB>
 *        node files-large-child.ts serve <homeDir>   (prints `listening <url>`)
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { JsRuntime } from '../src/js-runtime.ts';
import { startRestServer } from '../src/rest/server.ts';
import { REGISTRIES } from './runtime-helpers.ts';

const [mode, homeDir, workDir, sizeArg] = process.argv.slice(2) as [string, string, string, string];

/** Peak resident set size (`VmHWM`, KiB) of a process. */
function peakKiB(pid: number | 'self'): number {
  return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
}

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

if (mode === 'serve') {
  const server = await startRestServer({
    runtime: new JsRuntime({ homeDir, imageRegistries: REGISTRIES }),
    port: 0,
  });
  console.log(`listening ${server.url}`);
  process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
} else {
  const source = join(workDir, 'big.bin');
  execFileSync('dd', ['if=/dev/urandom', `of=${source}`, 'bs=1M', `count=${Number(sizeArg)}`, 'status=none']);

  let server: { pid: number; url: string; stop: () => void } | null = null;
  if (mode === 'rest') {
    const child = spawn(process.execPath, [import.meta.filename, 'serve', homeDir], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout });
    const url = await new Promise<string>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`the server exited with ${code}`)));
      lines.on('line', (line) => {
        if (line.startsWith('listening ')) resolve(line.slice('listening '.length));
      });
    });
    server = { pid: child.pid!, url, stop: () => child.kill('SIGTERM') };
  }
  const runtime = server
    ? new JsRuntime({ url: server.url })
    : new JsRuntime({ homeDir, imageRegistries: REGISTRIES });
  const box = await runtime.create({ image: 'busybox:latest', network: { mode: 'disabled' } });
  try {
    const before = { client: peakKiB('self'), server: server ? peakKiB(server.pid) : 0 };
    await box.copyIn(source, '/big.bin');
    const back = join(workDir, 'back.bin');
    await box.copyOut('/big.bin', back);
    // The copy's peaks, before this process reads both files again to hash them.
    const after = { client: peakKiB('self'), server: server ? peakKiB(server.pid) : 0 };
    console.log(
      JSON.stringify({
        sourceHash: await sha256(source),
        backHash: await sha256(back),
        sourceSize: statSync(source).size,
        backSize: statSync(back).size,
        before,
        after,
      }),
    );
  } finally {
    await runtime.remove(box.id, true);
    server?.stop();
  }
}
