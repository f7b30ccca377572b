/**
 * `npm run test:setup -w @seed/sandbox`: prepares a fresh machine for the sandbox package's tests and
 * demos. Idempotent and fast when everything is present:
 * 1. installs the Debian packages the whole package needs (when running as root and some are missing);
 * 2. reserves the host id range of the boxes' user namespaces (`seed-sandbox` in /etc/subuid and
 *    /etc/subgid, when running as root), and on cgroup v1/hybrid hosts sets the `favordynmods` cgroup
 *    mount option (src/engine/cgroup-tuning.ts);
 * 3. builds the offline images if missing and ensures the local registries run (scripts/registry.ts --auth),
 *    and prepares the rootless test account `sbxuser` (scripts/rootless-user.ts);
 * 4. pulls the small test images (busybox, python:slim, code-interpreter-v1, base) into the store the tests'
 *    runtimes link them from (`<cache>/test-home-images`), then builds and pushes the big chromium, firefox and desktop images of the BrowserBox/ComputerBox tests if
 *    missing, and pulls them into the image store those tests share (`<cache>/test-home-desktop`), unless
 *    `--base-only` is given (as `npm start` does).
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureFavorDynmods } from '../src/engine/cgroup-tuning.ts';
import { ensureSandboxIdRange } from '../src/engine/idmap.ts';
import { cacheDir } from './offline-images.ts';

/** Debian packages used by the sandbox package (engine, networking, images, tests). */
export const DEBIAN_PACKAGES = [
  'crun',
  'runc',
  'skopeo',
  'umoci',
  'docker-registry',
  'mmdebstrap',
  'busybox-static',
  'slirp4netns',
  'passt',
  'uidmap',
  'apache2-utils',
  'iproute2',
  'attr',
  'iptables',
  'nftables',
  'socat',
  'catatonit',
  'e2fsprogs',
  // btrfs box disks: copy-on-write snapshots, clone and export (src/engine/snapshot.ts).
  'btrfs-progs',
  'tmux',
  // gVisor (`runsc`): the `gvisor` isolation tier (src/engine/gvisor.ts).
  'runsc',
];

function log(m: string): void {
  console.error(`[sandbox setup] ${m}`);
}

function missingPackages(): string[] {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query's own format syntax
  const format = '-f=${Package} ${db:Status-Status}\n';
  const r = spawnSync('dpkg-query', ['-W', format, ...DEBIAN_PACKAGES], {
    encoding: 'utf8',
  });
  const installed = new Set(
    r.stdout
      .split('\n')
      .filter((l) => l.endsWith(' installed'))
      .map((l) => l.split(' ')[0]),
  );
  return DEBIAN_PACKAGES.filter((p) => !installed.has(p));
}

function apt(args: string[]): number {
  return (
    spawnSync('apt-get', args, {
      stdio: 'inherit',
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    }).status ?? 1
  );
}

/** Runs `scripts/<script>` with `args` on this Node; exits with its status when it fails. */
function runScript(script: string, ...args: string[]): void {
  const here = dirname(fileURLToPath(import.meta.url));
  const result = spawnSync(process.execPath, [join(here, script), ...args], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

function main(): void {
  const missing = missingPackages();
  if (missing.length > 0) {
    if (process.getuid?.() !== 0) {
      log(`missing Debian packages (run as root to install): ${missing.join(' ')}`);
    } else {
      log(`installing ${missing.join(' ')}`);
      const args = ['install', '-y', ...missing];
      if (apt(args) !== 0 && (apt(['update']) !== 0 || apt(args) !== 0)) {
        log('apt-get install failed');
        process.exit(1);
      }
    }
  }
  // The host ids of the boxes' user namespaces (`seed-sandbox` in /etc/subuid and /etc/subgid, see
  // src/engine/idmap.ts), added before the rootless account's block so that the two never overlap.
  if (process.getuid?.() === 0) {
    const range = ensureSandboxIdRange(true);
    log(
      `box user namespaces: box ids 0-${range.size - 1} are host ids ${range.hostUid}-${range.hostUid + range.size - 1}`,
    );
    // cgroup v1/hybrid hosts: moving each exec'd process into the box's cgroups costs ~10 ms without it
    // (src/engine/cgroup-tuning.ts).
    const tuning = ensureFavorDynmods();
    log(
      `cgroup favordynmods: ${tuning.outcome}${tuning.mountPoint ? ` (${tuning.mountPoint})` : ''}${tuning.reason ? `: ${tuning.reason}` : ''}`,
    );
  }
  // The local registries (building missing images), then the account the rootless tests run as
  // (`sandbox setup sbxuser`).
  runScript('registry.ts', '--auth');
  runScript('rootless-user.ts');
  // `--base-only` (used by `npm start`): busybox and python:slim only, not the big images below.
  if (process.argv.includes('--base-only')) return;
  // The small test images, unpacked once into the store the tests' runtimes link them from
  // (test/runtime-helpers.ts `seedImages`) instead of each test file pulling python:slim again.
  runScript(
    'prepull.ts',
    '--home',
    join(cacheDir(), 'test-home-images'),
    'busybox:latest',
    'python:slim',
    'code-interpreter-v1:latest',
    'base:latest',
  );
  // The BrowserBox/ComputerBox test images (big: built once, minutes, then cached), pulled and unpacked
  // into the store those tests share, here rather than inside a test's readiness timeout.
  runScript('registry.ts', '--images', 'chromium,firefox,desktop');
  runScript(
    'prepull.ts',
    '--home',
    join(cacheDir(), 'test-home-desktop'),
    'seed/desktop:latest',
    'seed/chromium:latest',
    'seed/firefox:latest',
  );
}

main();
