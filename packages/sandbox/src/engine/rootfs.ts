/**
 * A minimal root filesystem from the host's static busybox (Debian `busybox-static`), for engine
 * tests and the raw runtime benchmark: `bin/busybox` plus one symlink per applet, `/etc/passwd`
 * and `/etc/group` with root and nobody, and the usual empty top-level directories.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';

/** Where Debian's busybox-static installs the static binary. */
export const HOST_BUSYBOX = '/bin/busybox';

/**
 * Creates (idempotently) a busybox root filesystem in `dir`, usable as a single layer.
 * @returns `dir`.
 * @throws BoxError when the host has no static busybox at `HOST_BUSYBOX`.
 */
export function makeBusyboxRootfs(dir: string): string {
  if (existsSync(join(dir, 'bin', 'busybox'))) return dir;
  if (!existsSync(HOST_BUSYBOX))
    throw new BoxError(`${HOST_BUSYBOX} is missing (apt-get install busybox-static)`, {
      code: 'unsupported',
    });
  for (const d of ['bin', 'etc', 'root', 'tmp', 'home', 'var', 'proc', 'sys', 'dev']) {
    mkdirSync(join(dir, d), { recursive: true, mode: d === 'tmp' ? 0o1777 : 0o755 });
  }
  copyFileSync(HOST_BUSYBOX, join(dir, 'bin', 'busybox'));
  const applets = execFileSync(HOST_BUSYBOX, ['--list'], { encoding: 'utf8' }).split('\n').filter(Boolean);
  for (const a of applets) {
    if (a !== 'busybox' && !existsSync(join(dir, 'bin', a))) symlinkSync('busybox', join(dir, 'bin', a));
  }
  writeFileSync(
    join(dir, 'etc', 'passwd'),
    'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n',
  );
  writeFileSync(join(dir, 'etc', 'group'), 'root:x:0:\nnogroup:x:65534:\n');
  return dir;
}
