/**
 * Test helper: makes sure the local offline registries run and hold the offline images, by running
 * `scripts/registry.ts` (serialized across parallel test files by a lock). Import and await once per file:
 *
 *   const reg = await localRegistry();                 // busybox:latest and library/python:slim on :5000
 *   new ImageStore({ homeDir, registries: reg.registries });
 *   const auth = await localRegistry({ auth: true });  // htpasswd registry on :5001, same images
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { AUTH_PASSWORD, AUTH_REGISTRY_HOST, AUTH_USER, REGISTRY_HOST } from '../../scripts/offline-images.ts';
import type { JsImageRegistry } from '../../src/types.ts';

/** A ready local registry: its host, `imageRegistries` config resolving `python:slim` etc. through it. */
export interface LocalRegistry {
  /** `127.0.0.1:5000` (anonymous) or `127.0.0.1:5001` (htpasswd). */
  host: string;
  /** `[{ host, transport: 'http', search: true, auth? }]` — pass as `JsOptions.imageRegistries`. */
  registries: JsImageRegistry[];
  /** Credentials of the auth registry (absent for the anonymous one). */
  credentials?: { username: string; password: string };
}

const script = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'scripts', 'registry.ts');
const ready = new Map<string, Promise<void>>();

/**
 * Ensures the registry runs and holds `images` (default busybox and python; python is built with
 * mmdebstrap on first use, ≈ 40 s, normally already done by `npm run test:setup`). Rejects with the
 * script's output when it fails.
 */
export async function localRegistry(
  options: { auth?: boolean; images?: ('busybox' | 'python')[] } = {},
): Promise<LocalRegistry> {
  const images = (options.images ?? ['busybox', 'python']).join(',');
  const args = [script, '--quiet', '--images', images, ...(options.auth ? ['--auth'] : [])];
  const key = args.join(' ');
  let p = ready.get(key);
  if (!p) {
    p = promisify(execFile)(process.execPath, args, { timeout: 300_000 }).then(
      () => undefined,
      (err: Error & { stderr?: string }) => {
        ready.delete(key);
        throw new Error(`local registry setup failed: ${err.stderr || err.message}`);
      },
    );
    ready.set(key, p);
  }
  await p;
  if (options.auth) {
    const credentials = { username: AUTH_USER, password: AUTH_PASSWORD };
    return {
      host: AUTH_REGISTRY_HOST,
      registries: [{ host: AUTH_REGISTRY_HOST, transport: 'http', search: true, auth: credentials }],
      credentials,
    };
  }
  return { host: REGISTRY_HOST, registries: [{ host: REGISTRY_HOST, transport: 'http', search: true }] };
}
