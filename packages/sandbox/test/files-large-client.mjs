/**
 * Client process of `files-large.test.ts` as a user of the published package runs it: plain JavaScript
 * importing the BUILT SDK (`dist`, no TypeScript stripping in the process). Makes a host file of `sizeMiB`
 * MiB (random bytes, by `dd`), copies it into a box with `copyIn` and back out with `copyOut` on the
 * local runtime (`target` = homeDir) or over REST (`target` = server URL), and prints one JSON line:
 * SHA-256 of both host files, their sizes, and this process's peak RSS (`VmHWM`, KiB) at start, after the
 * SDK import, after the box was created and after the copy (hashing comes after that last reading); with
 * `serverPid`, the peaks of that process (the REST server) after the box was created and after the copy.
 * Usage: node files-large-client.mjs <sdk index.js> <local|rest> <homeDir|url> <workDir> <sizeMiB> [serverPid]
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const [sdkPath, mode, target, workDir, sizeMiB, serverPid] = process.argv.slice(2);
const peakKiB = (pid = 'self') =>
  Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]);

async function sha256(path) {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk);
  return hash.digest('hex');
}

const peaks = { start: peakKiB() };
const serverPeaks = {};
const { JsRuntime } = await import(sdkPath);
peaks.imported = peakKiB();
const source = join(workDir, 'big.bin');
const back = join(workDir, 'back.bin');
execFileSync('dd', ['if=/dev/urandom', `of=${source}`, 'bs=1M', `count=${Number(sizeMiB)}`, 'status=none']);
const runtime =
  mode === 'rest'
    ? new JsRuntime({ url: target })
    : new JsRuntime({
        homeDir: target,
        imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
      });
const box = await runtime.create({ image: 'busybox:latest', network: { mode: 'disabled' } });
try {
  peaks.created = peakKiB();
  if (serverPid) serverPeaks.created = peakKiB(serverPid);
  await box.copyIn(source, '/big.bin');
  await box.copyOut('/big.bin', back);
  peaks.copied = peakKiB();
  if (serverPid) serverPeaks.copied = peakKiB(serverPid);
} finally {
  await runtime.remove(box.id, true);
}
console.log(
  JSON.stringify({
    sourceHash: await sha256(source),
    backHash: await sha256(back),
    sourceSize: statSync(source).size,
    backSize: statSync(back).size,
    peaks,
    ...(serverPid ? { serverPeaks } : {}),
  }),
);
