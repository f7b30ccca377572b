/**
 * `npm run registry -w @seed/sandbox` (root: `npm run sandbox:registry`): builds the offline images that
 * are missing, starts Debian's docker-registry on 127.0.0.1:5000 (detached, storage outside the repo)
 * and pushes them; returns once the registry answers. Idempotent and fast when everything is there.
 *
 * Options: `--auth` also starts the htpasswd registry on 127.0.0.1:5001 (user `seed`, password
 * `seed-sandbox-test`; same storage); `--images busybox,python` limits what is built and pushed
 * (default busybox,python,base: `python` is `python:slim` and `code-interpreter-v1:latest`, `base` is
 * `base:latest`; `chromium`, `firefox` and `desktop` are big and built only when asked for); `--quiet`.
 */
import { parseArgs } from 'node:util';
import { prebuildDesktopImages } from './images-desktop.ts';
import {
  AUTH_REGISTRY_HOST,
  OFFLINE_IMAGES,
  type OfflineImageName,
  prebuildDebianImages,
  publishImage,
  REGISTRY_HOST,
  startRegistry,
  underLock,
} from './offline-images.ts';

const { values } = parseArgs({
  options: {
    auth: { type: 'boolean', default: false },
    images: { type: 'string', default: 'busybox,python,base' },
    quiet: { type: 'boolean', default: false },
  },
});

async function main(): Promise<void> {
  const log = values.quiet ? () => {} : (m: string) => console.error(`[sandbox registry] ${m}`);
  const names = values.images.split(',').filter(Boolean);
  for (const n of names) {
    if (!(n in OFFLINE_IMAGES))
      throw new Error(`--images: unknown image '${n}' (known: ${Object.keys(OFFLINE_IMAGES).join(', ')})`);
  }
  await startRegistry(false, log);
  if (values.auth) await startRegistry(true, log);
  for (const n of names) await publishImage(n as OfflineImageName, log);
  log(`ready: http://${REGISTRY_HOST}${values.auth ? ` and http://${AUTH_REGISTRY_HOST} (auth)` : ''}`);
}

// Images that take minutes to build (python, base, chromium, desktop) are built before the registry lock
// is taken (see prebuildDebianImages and images-desktop.ts).
if (process.env.SEED_SANDBOX_REGISTRY_LOCKED !== '1') {
  const names = values.images.split(',');
  await prebuildDebianImages(names)
    .then(() => prebuildDesktopImages(names))
    .catch((err: Error) => {
      console.error(`[sandbox registry] error: ${err.message}`);
      process.exit(1);
    });
}

if (!underLock()) {
  main().catch((err: Error) => {
    console.error(`[sandbox registry] error: ${err.message}`);
    process.exit(1);
  });
}
