/**
 * What the engines ask of the host system itself, outside any box: executables on `PATH`, whether a
 * binary is statically linked, the cgroup layout, the mount table, unmounting a box directory, and
 * search permission on a box directory for a user namespace's root. Every path here is a host path
 * the engine chose (state root, box directory), never one a box controls.
 */
import { chmodSync, closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { BoxError } from '../errors.ts';
import { run } from './host-process.ts';

/** Default search path (as execvp(3)'s): the host's when `PATH` is unset, a box's for tty commands. */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Finds an executable on the host `PATH` (`DEFAULT_PATH` when unset), or returns `name` itself when
 * it is an absolute path that exists.
 * @returns the absolute host path, or undefined when there is none.
 */
export function findExecutable(name: string): string | undefined {
  if (name.startsWith('/')) return existsSync(name) ? name : undefined;
  for (const dir of (process.env.PATH ?? DEFAULT_PATH).split(':')) {
    const p = join(dir, name);
    try {
      if (statSync(p).isFile()) return p;
    } catch {}
  }
  return undefined;
}

/**
 * True when the host file `path` is an ELF64 little-endian executable without a program interpreter
 * (`PT_INTERP`), i.e. statically linked and runnable inside any box. False when it cannot be read.
 */
export function isStaticElf(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const head = Buffer.alloc(4096);
    const n = readSync(fd, head, 0, head.length, 0);
    // ELF64 little-endian only (x86_64, arm64): e_phoff at 32, e_phentsize at 54, e_phnum at 56.
    if (n < 64 || head.readUInt32BE(0) !== 0x7f454c46 || head[4] !== 2 || head[5] !== 1) return false;
    const phoff = Number(head.readBigUInt64LE(32));
    const phentsize = head.readUInt16LE(54);
    const phnum = head.readUInt16LE(56);
    if (phoff + phentsize * phnum > n) return false;
    for (let i = 0; i < phnum; i++) if (head.readUInt32LE(phoff + i * phentsize) === 3) return false; // PT_INTERP
    return true;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** True when the host mounts cgroup v1 controllers and a cgroup2 hierarchy at `/sys/fs/cgroup/unified`. */
export function isHybridCgroupHost(): boolean {
  try {
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
    return / \/sys\/fs\/cgroup\/unified .* - cgroup2 /.test(mounts) && / - cgroup cgroup /.test(mounts);
  } catch {
    return false;
  }
}

/**
 * Host mount points at or under `dir`, deepest first, from `/proc/self/mountinfo` (octal escapes
 * such as `\040` decoded).
 * @throws the file system error when the mount table cannot be read.
 */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const out: string[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const mp = line.split(' ')[4];
    if (!mp) continue;
    const target = mp.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
    if (target === dir || target.startsWith(prefix)) out.push(target);
  }
  return out.sort((a, b) => b.length - a.length);
}

/**
 * Unmounts every mount under `boxDir`, innermost first as `mountsUnder` lists them (lazily when a
 * plain unmount fails). `umount` is given the mount point from the host's mount table.
 * @throws BoxError when a mount is still there after both tries.
 */
export async function unmountBoxDir(boxDir: string): Promise<void> {
  for (const m of mountsUnder(boxDir)) {
    let r = await run('/bin/umount', [m]);
    if (r.code !== 0) r = await run('/bin/umount', ['-l', m]);
    if (r.code !== 0 && mountsUnder(m).includes(m))
      throw new BoxError(`unmounting ${m} failed: ${r.stderr.trim()}`, { code: 'internal' });
  }
}

/**
 * Gives everyone search permission (`o+x`, not read) on the host directory `dir` and each of its
 * ancestors lacking it, as Docker's user-namespace remapping does for its data root: the OCI runtime
 * (or runsc's gofer) looks up the box root and bind sources as the box's mapped root, which owns none
 * of them.
 * @throws the file system error when a directory cannot be read or changed.
 */
export function allowTraversal(dir: string): void {
  for (let d = dir; ; d = dirname(d)) {
    const mode = statSync(d).mode;
    if ((mode & 0o001) === 0) chmodSync(d, (mode & 0o7777) | 0o001);
    if (d === '/') return;
  }
}
