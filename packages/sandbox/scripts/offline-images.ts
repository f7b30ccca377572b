/**
 * Offline images for tests and demos, built from Debian packages (no Docker Hub here), and the local
 * registries (Debian's `docker-registry`) that serve them:
 * - `busybox:latest` from `/bin/busybox` (package busybox-static) with one symlink per applet;
 * - `base:latest` (E2B's `base` template) from `mmdebstrap --variant=minbase` bookworm: bash, coreutils,
 *   python3 and sudo, the user `user` (uid 1000, home and working directory `/home/user`, passwordless sudo)
 *   as the default user; `root` stays selectable per command;
 * - `library/python:slim` (default image of `SimpleBox` and `CodeBox`): the same root plus pip, Debian's
 *   Jupyter Server and ipykernel (the stateful interpreter of `src/interpreter/`), numpy, pandas,
 *   matplotlib and pillow; runs as root. The same layer is also pushed as `code-interpreter-v1:latest`
 *   (E2B's code-interpreter template) with `user` as default user and `/home/user` as working directory.
 * Built layers are cached outside the repository (`/var/cache/seed-sandbox` as root, else
 * `~/.cache/seed-sandbox`; `SEED_SANDBOX_CACHE` overrides) so repeated runs only push (or do nothing).
 * A cached build records the hash of its recipe (packages, hooks, config): changing the recipe rebuilds
 * the image, and a registry tag whose manifest differs from the cached build is pushed again.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { createGzip } from 'node:zlib';
import tar from 'tar-stream';
import { RegistryClient } from '../src/images/client.ts';
import { httpRequest } from '../src/images/http.ts';
import type { ImageConfig } from '../src/images/oci.ts';
import { pushImage } from '../src/images/push.ts';
import { endpointFor } from '../src/images/reference.ts';
import { buildDesktopImage } from './images-desktop.ts';

/** Where built layers and registry storage live (outside the repository). */
export function cacheDir(): string {
  if (process.env.SEED_SANDBOX_CACHE) return process.env.SEED_SANDBOX_CACHE;
  return process.getuid?.() === 0 ? '/var/cache/seed-sandbox' : join(homedir(), '.cache', 'seed-sandbox');
}

/** The anonymous local registry. */
export const REGISTRY_HOST = '127.0.0.1:5000';
/** The htpasswd-protected local registry (same storage as the anonymous one). */
export const AUTH_REGISTRY_HOST = '127.0.0.1:5001';
/** Test-only credentials of the auth registry (loopback only, no real secret). */
export const AUTH_USER = 'seed';
/** Password of `AUTH_USER` on the auth registry (test-only, loopback only). */
export const AUTH_PASSWORD = 'seed-sandbox-test';

/** PATH of the offline images. */
export const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * A built image in the cache: one gzip layer with its digest, size (bytes) and diff id, plus the config;
 * `recipe` is the sha256 of what the image was built from (mmdebstrap builds only).
 */
export interface BuiltImage {
  layerPath: string;
  digest: string;
  size: number;
  diffId: string;
  config: ImageConfig;
  recipe?: string;
}

/**
 * One name an offline image is published under: repositories, tag, and optionally a runtime config that
 * replaces the build's (same layer, other default user or working directory).
 */
export interface OfflineImageTag {
  repos: readonly string[];
  tag: string;
  config?: ImageConfig['config'];
}

/** The default user of the E2B templates (`base`, `code-interpreter-v1`): uid 1000, home `/home/user`. */
export const TEMPLATE_USER = 'user';

/** Runtime config of the E2B templates: `user` in `/home/user`. */
const TEMPLATE_CONFIG: ImageConfig['config'] = {
  Env: [PATH_ENV, 'LANG=C.UTF-8', 'HOME=/home/user'],
  Cmd: ['/bin/bash'],
  User: TEMPLATE_USER,
  WorkingDir: '/home/user',
};

/** Offline images and the repository:tag names they are published under. */
export const OFFLINE_IMAGES: Record<
  'busybox' | 'python' | 'base' | 'chromium' | 'firefox' | 'desktop',
  { tags: readonly OfflineImageTag[] }
> = {
  busybox: { tags: [{ repos: ['library/busybox', 'busybox'], tag: 'latest' }] },
  python: {
    tags: [
      { repos: ['library/python', 'python'], tag: 'slim' },
      {
        repos: ['library/code-interpreter-v1', 'code-interpreter-v1'],
        tag: 'latest',
        config: TEMPLATE_CONFIG,
      },
    ],
  },
  base: { tags: [{ repos: ['library/base', 'base'], tag: 'latest' }] },
  /** Built only on request (BrowserBox, ComputerBox tests): see `images-desktop.ts`. */
  chromium: { tags: [{ repos: ['seed/chromium'], tag: 'latest' }] },
  firefox: { tags: [{ repos: ['seed/firefox'], tag: 'latest' }] },
  desktop: { tags: [{ repos: ['seed/desktop'], tag: 'latest' }] },
};
/** `busybox`, `python`, `base`, `chromium`, `firefox` or `desktop`. */
export type OfflineImageName = keyof typeof OFFLINE_IMAGES;

/** Hashes what flows through (sha256), counting bytes. */
function hasher(): Transform & { digest(): string; bytes: number } {
  const h = createHash('sha256');
  const t = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      h.update(chunk);
      (t as unknown as { bytes: number }).bytes += chunk.length;
      cb(null, chunk);
    },
  }) as Transform & { digest(): string; bytes: number };
  t.bytes = 0;
  t.digest = () => `sha256:${h.digest('hex')}`;
  return t;
}

/** Compresses a tar stream to `dir/layer.tar.gz` and writes `dir/image.json`; atomic (temp dir + rename). */
export async function storeLayer(
  dir: string,
  tarStream: Readable,
  config: ImageConfig,
  recipe?: string,
): Promise<BuiltImage> {
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  const diff = hasher();
  const comp = hasher();
  await pipeline(
    tarStream,
    diff,
    createGzip({ level: 6 }),
    comp,
    createWriteStream(join(tmp, 'layer.tar.gz')),
  );
  const built: BuiltImage = {
    layerPath: join(dir, 'layer.tar.gz'),
    digest: comp.digest(),
    size: comp.bytes,
    diffId: diff.digest(),
    config,
    ...(recipe ? { recipe } : {}),
  };
  await writeFile(join(tmp, 'image.json'), JSON.stringify(built, null, 2));
  await rm(dir, { recursive: true, force: true });
  await rename(tmp, dir);
  return built;
}

/** The cached build of `name`, if any and (when `recipe` is given) built from that recipe. */
async function cached(name: OfflineImageName, recipe?: string): Promise<BuiltImage | null> {
  const dir = join(cacheDir(), 'images', name);
  try {
    const built = JSON.parse(await readFile(join(dir, 'image.json'), 'utf8')) as BuiltImage;
    if (existsSync(built.layerPath) && (recipe === undefined || built.recipe === recipe)) return built;
  } catch {
    // not built yet
  }
  return null;
}

const EPOCH = new Date('2024-01-01T00:00:00Z');

/** Builds busybox:latest from the host's static busybox binary. */
async function buildBusybox(): Promise<BuiltImage> {
  const bin = ['/bin/busybox', '/usr/bin/busybox'].find((p) => existsSync(p));
  if (!bin) throw new Error('busybox not found: install the Debian package busybox-static');
  const list = spawnSync(bin, ['--list-full'], { encoding: 'utf8' });
  if (list.status !== 0) throw new Error(`busybox --list-full failed: ${list.stderr}`);
  const applets = list.stdout.split('\n').filter((l) => l && l !== 'bin/busybox');
  const pack = tar.pack();
  const dirs = new Map<string, number>([
    ['bin', 0o755],
    ['sbin', 0o755],
    ['usr', 0o755],
    ['usr/bin', 0o755],
    ['usr/sbin', 0o755],
    ['etc', 0o755],
    ['root', 0o700],
    ['home', 0o755],
    ['tmp', 0o1777],
    ['var', 0o755],
    ['dev', 0o755],
    ['proc', 0o555],
    ['sys', 0o555],
  ]);
  const fill = async () => {
    for (const [d, mode] of dirs) pack.entry({ name: `${d}/`, type: 'directory', mode, mtime: EPOCH });
    pack.entry({ name: 'bin/busybox', mode: 0o755, mtime: EPOCH }, readFileSync(bin));
    pack.entry(
      { name: 'etc/passwd', mode: 0o644, mtime: EPOCH },
      'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n',
    );
    pack.entry({ name: 'etc/group', mode: 0o644, mtime: EPOCH }, 'root:x:0:\nnogroup:x:65534:\n');
    for (const a of applets) {
      pack.entry({ name: a, type: 'symlink', linkname: '/bin/busybox', mode: 0o777, mtime: EPOCH });
    }
    pack.finalize();
  };
  void fill();
  const config: ImageConfig = {
    architecture: hostArch(),
    os: 'linux',
    config: { Env: [PATH_ENV], Cmd: ['sh'] },
  };
  return storeLayer(join(cacheDir(), 'images', 'busybox'), pack as unknown as Readable, config);
}

/** OCI architecture name of this machine. */
export function hostArch(): string {
  return process.arch === 'x64' ? 'amd64' : process.arch;
}

/**
 * Builds the cached image `name` (`<cache>/images/<name>`) as one layer: a Debian bookworm root made by
 * `mmdebstrap <options> bookworm -` (a tar on stdout, streamed into the layer) with the image `config`.
 * A failed build leaves nothing cached. @throws Error with the tail of mmdebstrap's stderr when it fails.
 */
export async function buildWithMmdebstrap(
  name: string,
  options: string[],
  config: ImageConfig['config'],
): Promise<BuiltImage> {
  const recipe = recipeOf(options, config);
  const child = spawn('mmdebstrap', [...options, 'bookworm', '-'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
  });
  const exited = new Promise<number>((res) => child.on('close', (code) => res(code ?? 1)));
  const dir = join(cacheDir(), 'images', name);
  const built = await storeLayer(
    dir,
    child.stdout,
    { architecture: hostArch(), os: 'linux', config },
    recipe,
  );
  if ((await exited) !== 0) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`mmdebstrap (${name} image) failed:\n${stderr}`);
  }
  return built;
}

/** sha256 of an mmdebstrap image's options and config: what `BuiltImage.recipe` records. */
export function recipeOf(options: readonly string[], config: ImageConfig['config']): string {
  return createHash('sha256').update(JSON.stringify({ options, config })).digest('hex');
}

/** Debian packages of the `base` image (E2B's base template; the SDK runs commands as `/bin/bash -l -c`). */
export const BASE_PACKAGES = ['bash', 'coreutils', 'python3', 'sudo'] as const;

/**
 * Debian packages `python:slim` adds to `BASE_PACKAGES`: pip, Jupyter Server and ipykernel (driven by
 * `src/interpreter/`), numpy, pandas, matplotlib and pillow.
 */
export const INTERPRETER_PACKAGES = [
  'python3-minimal',
  'python3-pip',
  'python-is-python3',
  'python3-jupyter-server',
  'python3-ipykernel',
  'python3-numpy',
  'python3-pandas',
  'python3-matplotlib',
  'python3-pil',
  // Satisfies python3-fonttools' `python3-scipy | python3-munkres` (matplotlib) without scipy, whose
  // pythran pulls gcc, boost and OpenBLAS headers (≈ 300 MiB) into the image.
  'python3-munkres',
] as const;

/**
 * mmdebstrap options of a Debian image with `packages` (no recommends): the user `user` (uid 1000, group
 * `user`, home `/home/user`, shell bash) with passwordless sudo, pip allowed to install system-wide (a box
 * is disposable), no apt lists, caches, docs or man pages.
 */
function debianOptions(packages: readonly string[]): string[] {
  return [
    '--variant=minbase',
    '--aptopt=APT::Install-Recommends "false"',
    `--include=${packages.join(',')}`,
    '--skip=output/dev',
    `--customize-hook=chroot "$1" useradd --create-home --uid 1000 --user-group --shell /bin/bash ${TEMPLATE_USER}`,
    `--customize-hook=echo '${TEMPLATE_USER} ALL=(ALL:ALL) NOPASSWD: ALL' > "$1"/etc/sudoers.d/${TEMPLATE_USER} && chmod 0440 "$1"/etc/sudoers.d/${TEMPLATE_USER}`,
    '--customize-hook=rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED',
    '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc/* "$1"/usr/share/man/*',
  ];
}

/** mmdebstrap recipes (options, config) of the Debian-built offline images `python` and `base`. */
const DEBIAN_RECIPES = {
  python: {
    options: debianOptions([...BASE_PACKAGES, ...INTERPRETER_PACKAGES]),
    config: { Env: [PATH_ENV, 'LANG=C.UTF-8'], Cmd: ['python3'] },
  },
  base: { options: debianOptions(BASE_PACKAGES), config: TEMPLATE_CONFIG },
} satisfies Record<string, { options: string[]; config: ImageConfig['config'] }>;

/** `python` or `base`: the images built by `buildWithMmdebstrap` from `DEBIAN_RECIPES`. */
type DebianImageName = keyof typeof DEBIAN_RECIPES;

function isDebianImage(name: string): name is DebianImageName {
  return Object.hasOwn(DEBIAN_RECIPES, name);
}

/** The recipe hash an image's cached build must carry (`undefined`: any build is current). */
function expectedRecipe(name: OfflineImageName): string | undefined {
  if (!isDebianImage(name)) return undefined;
  const r = DEBIAN_RECIPES[name];
  return recipeOf(r.options, r.config);
}

/** Returns the cached build of an offline image, building it when missing. */
export async function buildImage(name: OfflineImageName, log = (_: string) => {}): Promise<BuiltImage> {
  const hit = await cached(name, expectedRecipe(name));
  if (hit) return hit;
  log(`building ${name} image…`);
  const t = Date.now();
  const built =
    name === 'busybox'
      ? await buildBusybox()
      : isDebianImage(name)
        ? await buildWithMmdebstrap(name, DEBIAN_RECIPES[name].options, DEBIAN_RECIPES[name].config)
        : await buildDesktopImage(name);
  log(
    `built ${name} in ${((Date.now() - t) / 1000).toFixed(1)} s (${(built.size / 1048576).toFixed(1)} MiB compressed)`,
  );
  return built;
}

/** True when the registry at `host` answers `GET /v2/` (200 or 401). */
export async function registryAnswers(host: string): Promise<boolean> {
  try {
    const res = await httpRequest(new URL(`http://${host}/v2/`), { timeoutMs: 2000 });
    res.resume();
    return res.statusCode === 200 || res.statusCode === 401;
  } catch {
    return false;
  }
}

/** Starts docker-registry detached on `host` (storage in the cache dir) unless it already answers. */
export async function startRegistry(auth: boolean, log = (_: string) => {}): Promise<void> {
  const host = auth ? AUTH_REGISTRY_HOST : REGISTRY_HOST;
  if (await registryAnswers(host)) return;
  const base = cacheDir();
  const runDir = join(base, 'run');
  await mkdir(runDir, { recursive: true });
  await mkdir(join(base, 'registry'), { recursive: true });
  const name = auth ? 'registry-auth' : 'registry';
  let authConf = '';
  if (auth) {
    const htpasswd = join(runDir, 'htpasswd');
    const r = spawnSync('htpasswd', ['-Bbn', AUTH_USER, AUTH_PASSWORD], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`htpasswd failed (install apache2-utils): ${r.stderr}`);
    await writeFile(htpasswd, r.stdout, { mode: 0o600 });
    authConf = `auth:\n  htpasswd:\n    realm: seed-sandbox\n    path: ${htpasswd}\n`;
  }
  const conf = join(runDir, `${name}.yml`);
  await writeFile(
    conf,
    `version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${join(base, 'registry')}\n  delete:\n    enabled: true\nhttp:\n  addr: ${host}\n${authConf}`,
  );
  const out = openSync(join(runDir, `${name}.log`), 'a');
  const child = spawn('docker-registry', ['serve', conf], { detached: true, stdio: ['ignore', out, out] });
  const spawnError = new Promise<Error>((res) => child.on('error', res));
  child.unref();
  await writeFile(join(runDir, `${name}.pid`), String(child.pid));
  log(`started docker-registry on ${host} (pid ${child.pid}, log ${join(runDir, `${name}.log`)})`);
  for (let i = 0; i < 100; i++) {
    if (await registryAnswers(host)) return;
    const failed = await Promise.race([spawnError, sleep(100)]);
    if (failed)
      throw new Error(
        `cannot start docker-registry (install the Debian package docker-registry): ${failed.message}`,
      );
    if (child.exitCode !== null) break;
  }
  throw new Error(`docker-registry did not answer on ${host}; see ${join(runDir, `${name}.log`)}`);
}

/** The config blob `pushImage` writes for a one-layer image (its digest identifies layer and config). */
function configDigest(built: BuiltImage, config: ImageConfig['config']): string {
  const full: ImageConfig = { ...built.config, config, rootfs: { type: 'layers', diff_ids: [built.diffId] } };
  return `sha256:${createHash('sha256').update(JSON.stringify(full)).digest('hex')}`;
}

/** True when `repo:tag` on the anonymous registry is a manifest with the config digest `digest`. */
async function tagIsCurrent(
  client: RegistryClient,
  repo: string,
  tag: string,
  digest: string,
): Promise<boolean> {
  const res = await client.request(repo, `${repo}/manifests/${tag}`, {
    accept: [404],
    headers: { accept: 'application/vnd.oci.image.manifest.v1+json' },
  });
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  if (res.statusCode !== 200) return false;
  try {
    const manifest = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { config?: { digest?: string } };
    return manifest.config?.digest === digest;
  } catch {
    return false;
  }
}

/**
 * Pushes an offline image to the anonymous registry under each of its names whose manifest differs from
 * the cached build (built first when missing or built from another recipe).
 */
export async function publishImage(name: OfflineImageName, log = (_: string) => {}): Promise<void> {
  const client = new RegistryClient(endpointFor(REGISTRY_HOST));
  const built = await buildImage(name, log);
  for (const { repos, tag, config = built.config.config ?? {} } of OFFLINE_IMAGES[name].tags) {
    const digest = configDigest(built, config);
    for (const repo of repos) {
      if (await tagIsCurrent(client, repo, tag, digest)) continue;
      const t = Date.now();
      await pushImage(
        { host: REGISTRY_HOST },
        repo,
        [tag],
        [{ blob: { path: built.layerPath, digest: built.digest, size: built.size }, diffId: built.diffId }],
        { ...built.config, config },
      );
      log(`pushed ${name} as ${repo}:${tag} in ${Date.now() - t} ms`);
    }
  }
}

/**
 * Builds the requested Debian images (`python`, `base`) whose cached build is missing or from another
 * recipe, each in a child process under its own `flock` (`<cache>/build-<name>.lock`), before the caller
 * takes the registry lock: a build takes minutes, and holding the registry lock that long would stall
 * every other user of the registry (parallel test files). Other names are ignored.
 * @throws Error when a build fails.
 */
export async function prebuildDebianImages(names: readonly string[]): Promise<void> {
  for (const name of names) {
    if (!isDebianImage(name) || (await cached(name, expectedRecipe(name)))) continue;
    await mkdir(cacheDir(), { recursive: true });
    const r = spawnSync(
      'flock',
      [join(cacheDir(), `build-${name}.lock`), process.execPath, import.meta.filename, name],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (r.status !== 0) throw new Error(`building the ${name} image failed`);
  }
}

/** Re-runs the current script under `flock` so that concurrent callers (parallel tests) serialize. */
export function underLock(): boolean {
  if (process.env.SEED_SANDBOX_REGISTRY_LOCKED === '1') return false;
  const lock = join(cacheDir(), 'registry.lock');
  spawnSync('mkdir', ['-p', cacheDir()]);
  const r = spawnSync('flock', [lock, process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, SEED_SANDBOX_REGISTRY_LOCKED: '1' },
  });
  process.exitCode = r.status ?? 1;
  return true;
}

/** `node scripts/offline-images.ts NAME…` (run under the build lock): builds each image not cached yet. */
if (import.meta.main) {
  for (const name of process.argv.slice(2)) {
    if (!Object.hasOwn(OFFLINE_IMAGES, name)) {
      console.error(`[sandbox registry] unknown image '${name}'`);
      process.exit(2);
    }
    await buildImage(name as OfflineImageName, (m) => console.error(`[sandbox registry] ${m}`)).catch(
      (error: Error) => {
        console.error(`[sandbox registry] error: ${error.message}`);
        process.exit(1);
      },
    );
  }
}
