/**
 * The big offline images of `BrowserBox` and `ComputerBox` (spec 002), built from Debian bookworm
 * packages with `mmdebstrap --variant=minbase` (no recommends), like `python:slim` in
 * `offline-images.ts`. They are built lazily: only `--images chromium` / `--images desktop` of
 * `scripts/registry.ts` (the tests of those boxes ask for them) builds and pushes them; the layers are
 * cached outside the repository with the other offline images.
 *
 * - `seed/chromium:latest`: Debian's `chromium` (headless, remote debugging) plus `socat` and a font.
 * - `seed/firefox:latest`: Debian's `firefox-esr` (headless, WebDriver BiDi remote debugging), same extras.
 * - `seed/desktop:latest`: Xvfb, the `jwm` window manager, `xdotool`, `xterm`, `scrot` (PNG
 *   screenshots), `x11-utils`, `x11vnc`, noVNC + websockify (the browser-viewable desktop) and
 *   `openssl` (self-signed certificate of the HTTPS GUI port).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { type BuiltImage, buildWithMmdebstrap, cacheDir, PATH_ENV } from './offline-images.ts';

/** Debian packages of each desktop-class image (installed without recommends). */
export const DESKTOP_IMAGE_PACKAGES = {
  chromium: ['chromium', 'socat', 'fonts-dejavu-core', 'ca-certificates'],
  firefox: ['firefox-esr', 'socat', 'fonts-dejavu-core', 'ca-certificates'],
  desktop: [
    'xvfb',
    'xauth',
    'jwm',
    'xterm',
    'xdotool',
    'scrot',
    'x11-utils',
    'x11vnc',
    'novnc',
    'websockify',
    'openssl',
    'xfonts-base',
    'fonts-dejavu-core',
    'procps',
  ],
} as const;

/** `chromium` or `desktop`. */
export type DesktopImageName = keyof typeof DESKTOP_IMAGE_PACKAGES;

/**
 * Builds one desktop-class image with mmdebstrap into the cache (`<cache>/images/<name>`); a few minutes
 * and a few hundred MiB the first time. @throws Error with mmdebstrap's output when it fails.
 */
export function buildDesktopImage(name: DesktopImageName): Promise<BuiltImage> {
  return buildWithMmdebstrap(
    name,
    [
      '--variant=minbase',
      '--aptopt=APT::Install-Recommends "false"',
      `--include=${DESKTOP_IMAGE_PACKAGES[name].join(',')}`,
      '--skip=output/dev',
      '--customize-hook=rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/usr/share/doc/* "$1"/usr/share/man/*',
    ],
    { Env: [PATH_ENV, 'LANG=C.UTF-8', 'HOME=/root'], Cmd: ['/bin/sh'] },
  );
}

/**
 * Builds the requested desktop-class images that are not cached yet, each in a child process under its
 * own `flock` (`<cache>/build-<name>.lock`), before the caller takes the registry lock: a build takes
 * minutes, and holding the registry lock that long would stall every other user of the registry (parallel
 * test files). Other names are ignored. @throws Error when a build fails.
 */
export async function prebuildDesktopImages(names: readonly string[]): Promise<void> {
  for (const name of names) {
    if (!Object.hasOwn(DESKTOP_IMAGE_PACKAGES, name)) continue;
    if (existsSync(join(cacheDir(), 'images', name, 'image.json'))) continue;
    mkdirSync(cacheDir(), { recursive: true });
    const r = spawnSync(
      'flock',
      [join(cacheDir(), `build-${name}.lock`), process.execPath, import.meta.filename, name],
      { stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (r.status !== 0) throw new Error(`building the ${name} image failed`);
  }
}

/** `node scripts/images-desktop.ts NAME…` (run under the build lock): builds each image not cached yet. */
async function main(): Promise<void> {
  for (const name of process.argv.slice(2) as DesktopImageName[]) {
    if (existsSync(join(cacheDir(), 'images', name, 'image.json'))) continue;
    console.error(`[sandbox registry] building the ${name} image (mmdebstrap, a few minutes)…`);
    const t = Date.now();
    const built = await buildDesktopImage(name);
    console.error(
      `[sandbox registry] built ${name} in ${((Date.now() - t) / 1000).toFixed(1)} s (${(built.size / 1048576).toFixed(1)} MiB compressed)`,
    );
  }
}

if (import.meta.main) {
  main().catch((error: Error) => {
    console.error(`[sandbox registry] error: ${error.message}`);
    process.exit(1);
  });
}
