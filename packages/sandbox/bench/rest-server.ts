/**
 * What the REST benches share: the local registry of the offline images, and a `sandbox serve` child on an
 * ephemeral loopback port.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';

const packageDir = join(import.meta.dirname, '..');

/** Starts the local registry with the busybox image if needed. @throws Error when it cannot start. */
export function ensureRegistry(): void {
  const script = join(packageDir, 'scripts', 'registry.ts');
  const result = spawnSync(process.execPath, [script, '--quiet', '--images', 'busybox'], {
    stdio: 'inherit',
  });
  if (result.status !== 0) throw new Error('the local registry could not be started (npm run registry)');
}

/**
 * Starts `sandbox serve` over `home` on an ephemeral loopback port; resolves with its URL once it listens.
 * @throws Error (rejects) when the server exits first, with its log.
 */
export function serve(home: string): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      join(packageDir, 'bin', 'sandbox.ts'),
      '--home',
      home,
      '--registry',
      'http://127.0.0.1:5000',
      'serve',
      '--port',
      '0',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return new Promise((resolve, reject) => {
    let log = '';
    child.stderr!.on('data', (chunk: Buffer) => {
      log += chunk.toString();
      const match = /REST runtime on (http:\/\/[^\s]+)\/v1/.exec(log);
      if (match) resolve({ url: match[1]!, child });
    });
    child.on('exit', (code) => reject(new Error(`sandbox serve exited with ${code}: ${log}`)));
  });
}
