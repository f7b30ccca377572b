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
    const entry = parseIdFile(rootfs, '/etc/passwd', field).get(u);
    if (!entry || entry[2] === undefined)
      throw new BoxError(`${field}: user '${u}' is not in the image's /etc/passwd`, {
        field,
        code: 'invalid_option',
      });
    uid = entry[2];
    gid = entry[3];
  }
  if (g !== undefined && g !== '') {
    if (/^\d+$/.test(g)) gid = g;
    else {
      const entry = parseIdFile(rootfs, '/etc/group', field).get(g);
      if (!entry || entry[2] === undefined)
        throw new BoxError(`${field}: group '${g}' is not in the image's /etc/group`, {
          field,
          code: 'invalid_option',
        });
      gid = entry[2];
    }
  }
  return `${uid}:${gid ?? '0'}`;
}
