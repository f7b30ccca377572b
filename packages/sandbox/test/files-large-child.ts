/**
 * Child process of `files-large.test.ts`: makes a host file of `SIZE_MIB` MiB (random bytes, written in
 * 1 MiB chunks), copies it into a box with `copyIn` and back out with `copyOut` on the local runtime or
 * over REST (server and client both in this process), and prints one JSON line: SHA-256 of both host
 * files, their sizes, and this process's peak RSS (`maxRSS`, KiB).
 * Usage: node files-large-child.ts <local|rest> <homeDir> <workDir> <sizeMiB>
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, statSync } from 'node:fs';
import { join } from 'node:path';
import { startRestServer } from '../src/rest/server.ts';
import { JsRuntime } from '../src/runtime/runtime.ts';
import { REGISTRIES } from './runtime-helpers.ts';

const [mode, homeDir, workDir, sizeArg] = process.argv.slice(2) as [string, string, string, string];
const sizeMiB = Number(sizeArg);

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

const source = join(workDir, 'big.bin');
// Made by dd, outside this process, so that the peak RSS measured is the copy's.
execFileSync('dd', ['if=/dev/urandom', `of=${source}`, 'bs=1M', `count=${sizeMiB}`, 'status=none']);

const phases: Record<string, number> = { generated: process.resourceUsage().maxRSS };
const local = new JsRuntime({ homeDir, imageRegistries: REGISTRIES });
const server = mode === 'rest' ? await startRestServer({ runtime: local, port: 0 }) : null;
const runtime = server ? new JsRuntime({ url: server.url }) : local;
const box = await runtime.create({ image: 'busybox:latest', network: { mode: 'disabled' } });
try {
  phases.created = process.resourceUsage().maxRSS;
  await box.copyIn(source, '/big.bin');
  phases.copiedIn = process.resourceUsage().maxRSS;
  const back = join(workDir, 'back.bin');
  await box.copyOut('/big.bin', back);
  // The copy's peak, before this process reads both files again to hash them.
  const maxRssKiB = process.resourceUsage().maxRSS;
  const result = {
    sourceHash: await sha256(source),
    backHash: await sha256(back),
    sourceSize: statSync(source).size,
    backSize: statSync(back).size,
    maxRssKiB,
    phases,
  };
  console.log(JSON.stringify(result));
} finally {
  await runtime.remove(box.id, true);
  await server?.close();
}
