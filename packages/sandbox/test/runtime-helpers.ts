/**
 * Shared helpers of the runtime, boxes and CLI tests: the local registry (started through the image
 * store's idempotent script), temporary home directories and a runtime on them.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBox } from '../src/runtime/box.ts';
import type { JsImageRegistry } from '../src/types.ts';

/** The local registry of the test images (`busybox:latest`, `library/python:slim`). */
export const REGISTRIES: JsImageRegistry[] = [{ host: '127.0.0.1:5000', transport: 'http', search: true }];
/** Small image for most tests. */
export const BUSYBOX = 'busybox:latest';

const packageDir = join(import.meta.dirname, '..');

/** Starts the local registry (and builds missing images) unless it already runs. Idempotent. */
export function ensureRegistry(): void {
  const result = spawnSync(process.execPath, [join(packageDir, 'scripts', 'registry.ts'), '--quiet'], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (result.status !== 0) throw new Error('the local test registry could not be started');
}

/** A fresh temporary homeDir (no spaces: the engine's state root lives in it). */
export function tempHome(prefix = 'sandbox-rt-'): string {
  const dir = mkdtempSync(join('/tmp', prefix));
  tempDirs.push(dir);
  return dir;
}

/** A runtime on a fresh temporary homeDir using the local registry. */
export function testRuntime(homeDir = tempHome()): JsRuntime {
  return new JsRuntime({ homeDir, imageRegistries: REGISTRIES });
}

const tempDirs: string[] = [];

/**
 * Removes every box of every homeDir made by `tempHome` in this test file, then the directories themselves
 * (images included). Call from a top-level `after`.
 */
export async function cleanupAll(): Promise<void> {
  for (const dir of tempDirs.splice(0)) {
    if (existsSync(join(dir, 'state.db'))) {
      const runtime = new JsRuntime({ homeDir: dir });
      for (const info of await runtime.listInfo()) await runtime.remove(info.id, true);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Box directories left under a homeDir. */
export function boxDirs(homeDir: string): string[] {
  try {
    return readdirSync(join(homeDir, 'boxes'));
  } catch {
    return [];
  }
}

/** Runs a command in a box to completion: exit code and whole stdout/stderr. */
export async function run(
  box: JsBox,
  cmd: string,
  args: string[] = [],
  env?: Record<string, string>,
  tty?: boolean,
): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const execution = await box.exec(cmd, args, env, tty);
  const stdout = await execution.stdout();
  const stderr = await execution.stderr();
  const out: string[] = [];
  const err: string[] = [];
  await Promise.all([
    (async () => {
      for (let line = await stdout.next(); line !== null; line = await stdout.next()) out.push(line);
    })(),
    (async () => {
      for (let line = await stderr.next(); line !== null; line = await stderr.next()) err.push(line);
    })(),
  ]);
  const { exitCode } = await execution.wait();
  return { exitCode, stdout: out.join('\n'), stderr: err.join('\n') };
}
