/**
 * Resolving a box user (`uid[:gid]` or `name[:group]`) against the box image's `/etc/passwd` and
 * `/etc/group`, read confined to the box root (confined.ts): symlinks in the box resolve inside it,
 * never to host files. Used by every engine's `exec` and by the runtime for a box's default user.
 */
import { BoxError } from '../errors.ts';
import { readFileInRoot } from './confined.ts';

/** Entries of the box's `/etc/passwd` or `/etc/group` by name, read confined to the box root. */
function parseIdFile(rootfs: string, inBoxPath: string, field: string): Map<string, string[]> {
  const map = new Map<string, string[]>();
  let text: string;
  try {
    text = readFileInRoot(rootfs, inBoxPath)?.toString('utf8') ?? '';
  } catch (err) {
    throw new BoxError(`${field}: cannot read the image's ${inBoxPath}: ${(err as Error).message}`, {
      field,
      code: 'invalid_option',
    });
  }
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f[0]) map.set(f[0], f);
  }
  return map;
}

/**
 * The fields of the entry named `name` (a `what`: `user` or `group`) in the box's `inBoxPath`, with at
 * least an id (third field).
 * @throws BoxError `invalid_option` naming `field` when the image has no such entry.
 */
function namedEntry(rootfs: string, inBoxPath: string, what: string, name: string, field: string): string[] {
  const entry = parseIdFile(rootfs, inBoxPath, field).get(name);
  if (!entry || entry[2] === undefined) {
    throw new BoxError(`${field}: ${what} '${name}' is not in the image's ${inBoxPath}`, {
      field,
      code: 'invalid_option',
    });
  }
  return entry;
}

/**
 * Resolves `user` (`uid[:gid]` or `name[:group]`) against the box root's `/etc/passwd` and
 * `/etc/group`, to the `uid:gid` form OCI runtimes take. The files are read confined to `rootfs`
 * (confined.ts): symlinks in the box resolve inside it, never to host files.
 * @throws BoxError naming `field` when a name is not in the image or the files cannot be read.
 */
export function resolveUser(rootfs: string, user: string, field: string): string {
  const [u = '', g] = user.split(':', 2);
  let uid: string;
  let gid: string | undefined;
  if (/^\d+$/.test(u)) {
    uid = u;
    const entry = [...parseIdFile(rootfs, '/etc/passwd', field).values()].find((f) => f[2] === u);
    gid = entry?.[3];
  } else {
    const entry = namedEntry(rootfs, '/etc/passwd', 'user', u, field);
    uid = entry[2]!;
    gid = entry[3];
  }
  if (g !== undefined && g !== '') {
    gid = /^\d+$/.test(g) ? g : namedEntry(rootfs, '/etc/group', 'group', g, field)[2];
  }
  return `${uid}:${gid ?? '0'}`;
}
