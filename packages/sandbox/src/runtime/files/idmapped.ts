/**
 * Changes to a box's files where host root has no id: in a host volume, which a box with a user
 * namespace gets as an idmapped bind (host uid `k` is box uid `k`, ENGINE.md "User namespaces"),
 * host uid 0 has no place in the mapping, so the kernel refuses every call of host root that creates,
 * renames or removes an entry there (`EOVERFLOW`). Each function here first tries the call as this
 * (host root) process and, on `EOVERFLOW`, makes it as the box user's host ids in a short perl process
 * (perl-base is Essential in Debian) that gets the directories as descriptors, never as paths.
 */
import { spawnSync } from 'node:child_process';
import {
  constants as fsConstants,
  mkdirSync,
  openSync,
  renameSync,
  rmdirSync,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { FileUser } from './root.ts';

/** `renameat(2)` numbers by Node `process.arch` (x86_64, arm64). */
const RENAMEAT: Record<string, number> = { x64: 264, arm64: 38 };

/**
 * `perl -e <this> <renameat nr> <op> <uid> <gid> <args…>`, directory descriptors as fds 3 (and 4, the
 * target directory of `rename`). It changes into fd 3 while still root (after changing its ids a process
 * may no longer open `/proc/self/fd`), takes the user's gid and uid, and runs the operation: `file
 * <name> <mode>` (O_CREAT|O_EXCL|O_NOFOLLOW), `dir <name> <mode>`, `symlink <name> <target>`, `unlink
 * <name>`, `rmdir <name>`, `rename <from> <to>`. On failure it prints the errno number.
 */
const AS_USER_PL = `use strict; use Fcntl;
my ($renameat, $op, $uid, $gid, @a) = @ARGV;
sub fail { print STDERR ($!+0); exit 1; }
opendir(my $d, '/proc/self/fd/3') or fail(); chdir($d) or fail();
$) = "$gid $gid"; $( = $gid; $> = $uid; $< = $uid; fail() if $> != $uid;
if ($op eq 'file') { sysopen(my $f, $a[0], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, oct($a[1])) or fail(); }
elsif ($op eq 'dir') { mkdir($a[0], oct($a[1])) or fail(); }
elsif ($op eq 'symlink') { symlink($a[1], $a[0]) or fail(); }
elsif ($op eq 'unlink') { unlink($a[0]) or fail(); }
elsif ($op eq 'rmdir') { rmdir($a[0]) or fail(); }
elsif ($op eq 'rename') { my ($from, $to) = @a; syscall($renameat, 3, $from, 4, $to) == 0 or fail(); }`;

function at(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}

/**
 * Runs one operation of `AS_USER_PL` as `user`'s host ids.
 * @throws an Error with the errno `code` of the failed call (EEXIST, EACCES, ENOTEMPTY, …).
 */
function asUser(user: FileUser, op: string, dirFds: number[], args: string[]): void {
  const nr = RENAMEAT[process.arch] ?? RENAMEAT.x64;
  const r = spawnSync(
    'perl',
    ['-e', AS_USER_PL, String(nr), op, String(user.uid), String(user.gid), ...args],
    {
      stdio: ['ignore', 'ignore', 'pipe', ...dirFds],
      encoding: 'utf8',
    },
  );
  if (r.status === 0) return;
  const n = Number.parseInt(r.stderr ?? '', 10);
  const code = Object.entries(osConstants.errno).find(([, v]) => v === n)?.[0] ?? 'EIO';
  throw Object.assign(new Error(`${code}: ${op} '${args[0]}' as uid ${user.uid} failed`), { code });
}

/** Runs `self`; on `EOVERFLOW` runs `fallback` instead. */
function orAsUser<T>(self: () => T, fallback: () => T): T {
  try {
    return self();
  } catch (error) {
    if ((error as NodeJS.ErrnoException)?.code !== 'EOVERFLOW') throw error;
    return fallback();
  }
}

/** `mkdir` of `name` in `dirFd` (mode bits octal number, e.g. 0o755). */
export function mkdirAs(user: FileUser, dirFd: number, name: string, mode: number): void {
  orAsUser(
    () => mkdirSync(at(dirFd, name), mode),
    () => asUser(user, 'dir', [dirFd], [name, mode.toString(8)]),
  );
}

/**
 * Creates the regular file `name` in `dirFd` (`O_CREAT|O_EXCL|O_NOFOLLOW`, `mode`) and opens it for
 * writing. @returns the descriptor (the caller closes it).
 */
export function createFileAs(user: FileUser, dirFd: number, name: string, mode: number): number {
  const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = fsConstants;
  return orAsUser(
    () => openSync(at(dirFd, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode),
    () => {
      asUser(user, 'file', [dirFd], [name, mode.toString(8)]);
      return openSync(at(dirFd, name), O_WRONLY | O_NOFOLLOW);
    },
  );
}

/** A symlink `name` → `target` in `dirFd`. */
export function symlinkAs(user: FileUser, dirFd: number, name: string, target: string): void {
  orAsUser(
    () => symlinkSync(target, at(dirFd, name)),
    () => asUser(user, 'symlink', [dirFd], [name, target]),
  );
}

/** Unlinks the non-directory `name` of `dirFd`. */
export function unlinkAs(user: FileUser, dirFd: number, name: string): void {
  orAsUser(
    () => unlinkSync(at(dirFd, name)),
    () => asUser(user, 'unlink', [dirFd], [name]),
  );
}

/** Removes the empty directory `name` of `dirFd`. */
export function rmdirAs(user: FileUser, dirFd: number, name: string): void {
  orAsUser(
    () => rmdirSync(at(dirFd, name)),
    () => asUser(user, 'rmdir', [dirFd], [name]),
  );
}

/** Renames `fromName` of `fromDir` to `toName` of `toDir` (replacing a file there, as rename(2)). */
export function renameAs(
  user: FileUser,
  fromDir: number,
  fromName: string,
  toDir: number,
  toName: string,
): void {
  orAsUser(
    () => renameSync(at(fromDir, fromName), at(toDir, toName)),
    () => asUser(user, 'rename', [fromDir, toDir], [fromName, toName]),
  );
}
