/**
 * Shared helpers of the runtime, boxes and CLI tests: the local registry (started through the image
 * store's idempotent script), temporary home directories and a runtime on them.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { cacheDir } from '../scripts/offline-images.ts';
// internal: findExecutable looks runsc up on PATH the way the engine does
import { findExecutable } from '../src/engine/engine.ts';
import { type JsBox, type JsImageRegistry, JsRuntime } from '../src/index.ts';

/** The local registry of the test images (`busybox:latest`, `library/python:slim`). */
export const REGISTRIES: JsImageRegistry[] = [{ host: '127.0.0.1:5000', transport: 'http', search: true }];
/** Small image for most tests. */
export const BUSYBOX = 'busybox:latest';
/** node:test's `skip` for the gVisor tests: `false` when runsc is installed, else the reason. */
export const GVISOR_SKIP: string | false = findExecutable('runsc')
  ? false
  : 'runsc is not installed (npm run test:setup installs it)';

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

/**
 * The image store `npm run test:setup -w @seed/sandbox` fills with the test images (busybox, python:slim,
 * code-interpreter-v1, base), unpacked once per machine (`<cache>/test-home-images`, scripts/setup.ts).
 */
export const SHARED_IMAGES_HOME = join(cacheDir(), 'test-home-images');

/**
 * Gives `homeDir`'s image store the images of {@link SHARED_IMAGES_HOME} without pulling them again: the
 * reference records are copied, the blobs hard-linked and each unpacked layer directory linked by a
 * symbolic link (the layers are read-only lower layers of the boxes' root filesystems). A store that
 * removes such an image removes only its own links. Does nothing when the shared store is absent.
 */
export function seedImages(homeDir: string): void {
  const from = join(SHARED_IMAGES_HOME, 'images');
  if (!existsSync(join(from, 'refs'))) return;
  const to = join(homeDir, 'images');
  for (const sub of ['refs', 'blobs/sha256', 'layers/sha256']) mkdirSync(join(to, sub), { recursive: true });
  for (const name of readdirSync(join(from, 'refs'))) {
    const record = JSON.parse(readFileSync(join(from, 'refs', name), 'utf8')) as {
      digest: string;
      configDigest: string;
      layers: string[];
    };
    const layers = record.layers.map((d) => d.replace('sha256:', ''));
    if (!layers.every((hex) => existsSync(join(from, 'layers/sha256', hex, 'rootfs')))) continue;
    for (const digest of [record.digest, record.configDigest]) {
      const hex = digest.replace('sha256:', '');
      if (!existsSync(join(to, 'blobs/sha256', hex)))
        linkSync(join(from, 'blobs/sha256', hex), join(to, 'blobs/sha256', hex));
    }
    for (const hex of layers) {
      if (!existsSync(join(to, 'layers/sha256', hex)))
        symlinkSync(join(from, 'layers/sha256', hex), join(to, 'layers/sha256', hex));
    }
    if (!existsSync(join(to, 'refs', name))) copyFileSync(join(from, 'refs', name), join(to, 'refs', name));
  }
}

/** A fresh temporary homeDir (as {@link tempHome}) whose store already holds the shared test images. */
export function seededHome(prefix?: string): string {
  const home = tempHome(prefix);
  seedImages(home);
  return home;
}

/**
 * A runtime on a homeDir using the local registry: by default a fresh one seeded with the shared test
 * images ({@link seededHome}).
 */
export function testRuntime(homeDir = seededHome()): JsRuntime {
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

/** A child Node process running test code against a runtime (see {@link runtimeChild}). */
export interface RuntimeChild {
  /** The child's process id. */
  pid: number;
  /** Resolves with its stdout before `READY` (trimmed) once it prints `READY`; rejects if it exits first. */
  ready: Promise<string>;
  /** Resolves once it has exited: its exit code or signal and its whole stdout. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }>;
  /** Sends it SIGKILL; resolves once it has exited. */
  kill: () => Promise<void>;
}

/**
 * Runs `body` (ES module code, top-level await allowed) in a child Node process in which `runtime` is a
 * `JsRuntime` from the package entry on `homeDir` with the test registries. Its stdout is collected,
 * its stderr goes to the test's.
 */
export function runtimeChild(homeDir: string, body: string): RuntimeChild {
  const source = `
    import { JsRuntime } from ${JSON.stringify(join(packageDir, 'src', 'index.ts'))};
    const runtime = new JsRuntime({ homeDir: ${JSON.stringify(homeDir)}, imageRegistries: ${JSON.stringify(REGISTRIES)} });
    ${body}`;
  const proc = spawn(process.execPath, ['--conditions=seed-source', '--input-type=module', '-e', source], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stdout = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }>(
    (resolve) => proc.on('exit', (code, signal) => resolve({ code, signal, stdout })),
  );
  const ready = new Promise<string>((resolve, reject) => {
    proc.stdout.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes('READY')) resolve(stdout.replace('READY', '').trim());
    });
    proc.on('exit', () => reject(new Error(`child exited before READY: ${stdout}`)));
  });
  ready.catch(() => {}); // a child that never prints READY is not an unhandled rejection
  return {
    pid: proc.pid!,
    ready,
    exited,
    kill: async () => {
      proc.kill('SIGKILL');
      await exited;
    },
  };
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
