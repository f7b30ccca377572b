/**
 * The shell program the gVisor tier's files backend (gvisor.ts) runs inside a box, with the host's
 * static busybox bound at `/.sandbox/busybox` (`runsc exec`, as the box's user): every path is resolved
 * by the box's own kernel (the Sentry) as the box sees it, and every file is read and written by a box
 * process, never by a host process.
 *
 * Usage: `busybox sh -c "$SEED_FILES" sh <op> <args…>` with the program itself in the environment
 * variable `SEED_FILES` (the list batches run it again through xargs). Operations:
 *
 * | op | args | stdout |
 * |---|---|---|
 * | `read` | path | `K` then the file's bytes |
 * | `write` | path, mode (octal or empty), temporary suffix | the written path (hex) |
 * | `stat` | path | the resolved parent (hex), then a batch of the path |
 * | `list` | path, depth | the resolved directory (hex), then batches of its entries |
 * | `watch` | path, depth | a list every 250 ms between `@@S` and `@@E` lines, until killed |
 * | `mkdir` | path | `created` or `exists` |
 * | `rm` | path | nothing |
 * | `mv` | from, to | as `stat` of `to` |
 * | `ln` | target, path | nothing |
 *
 * A batch is `stat -c '%f %s %u %g %Y'` lines of its entries, `@@`, the NUL-terminated entry paths
 * as hex (`od`), `@@`, the NUL-terminated symlink targets (empty for other entries; `readlink` adds a
 * newline) as hex, `@@@`. A refusal is the line `seed-files: <CODE>` on stderr and exit code 3, with
 * CODE one of `ENOENT`, `ENOTDIR`, `EISDIR`, `EEXIST`, `EACCES`, `NOTFILE`, `EIO`; exit code 4 means an
 * entry vanished during a batch (the caller lists again).
 */
export const GVISOR_FILES_SCRIPT = String.raw`
B=/.sandbox/busybox
die() { echo "seed-files: $1" >&2; exit 3; }
hex() { printf '%s' "$1" | $B od -An -tx1 -v | $B tr -d ' \n'; echo; }
batch() {
  $B stat -c '%f %s %u %g %Y' -- "$@" || exit 4
  echo @@
  for e; do printf '%s\0' "$e"; done | $B od -An -tx1 -v | $B tr -d ' \n'; echo
  echo @@
  for e; do if [ -L "$e" ]; then $B readlink -- "$e"; fi; printf '\0'; done | $B od -An -tx1 -v | $B tr -d ' \n'; echo
  echo @@@
}
exists() { [ -e "$1" ] || [ -L "$1" ]; }
parent() {
  d=$($B dirname -- "$1"); n=$($B basename -- "$1")
  [ -e "$d" ] || die ENOENT
  [ -d "$d" ] || die ENOTDIR
  d=$($B readlink -f -- "$d") || die ENOENT
}
entries() {
  $B find "$1" -mindepth 1 -maxdepth "$2" -print0 2>/dev/null | $B xargs -0 -r $B sh -c "$SEED_FILES" sh batch
}
op=$1; shift
case $op in
batch) batch "$@" ;;
read)
  [ -e "$1" ] || die ENOENT
  [ -d "$1" ] && die EISDIR
  [ -f "$1" ] || die NOTFILE
  [ -r "$1" ] || die EACCES
  printf K; exec $B cat -- "$1" ;;
write)
  f=$1
  if [ -L "$f" ]; then f=$($B readlink -f -- "$f") || die ENOENT; fi
  d=$($B dirname -- "$f"); n=$($B basename -- "$f")
  if [ ! -d "$d" ]; then
    exists "$d" && die ENOTDIR
    $B mkdir -p -- "$d" 2>/dev/null || die EACCES
  fi
  d=$($B readlink -f -- "$d"); f="$d/$n"
  [ -d "$f" ] && die EISDIR
  exists "$f" && [ ! -f "$f" ] && die NOTFILE
  [ -w "$d" ] || die EACCES
  exists "$f" && { [ -w "$f" ] || die EACCES; }
  t="$d/.$n.seed-$3"
  (umask 077; $B cat > "$t") || { $B rm -f -- "$t"; die EIO; }
  if exists "$f"; then
    $B chown "$($B stat -c %u:%g -- "$f")" "$t" 2>/dev/null
    $B chmod "$($B stat -c %a -- "$f")" "$t"
  else
    m=$2; [ -n "$m" ] || m=644; $B chmod "$m" "$t"
  fi
  $B mv -f -- "$t" "$f" || { $B rm -f -- "$t"; die EACCES; }
  hex "$f" ;;
stat)
  parent "$1"; exists "$1" || die ENOENT
  hex "$d"; batch "$1" ;;
list|watch)
  d=$($B readlink -f -- "$1") || die ENOENT
  exists "$d" || die ENOENT
  [ -d "$d" ] || die ENOTDIR
  { [ -r "$d" ] && [ -x "$d" ]; } || die EACCES
  hex "$d"
  if [ "$op" = list ]; then entries "$d" "$2"; exit 0; fi
  while :; do echo @@S; entries "$d" "$2"; echo @@E; $B sleep 0.25; [ -d "$d" ] || exit 0; done ;;
mkdir)
  if [ -d "$1" ]; then echo exists; exit 0; fi
  exists "$1" && die EEXIST
  $B mkdir -p -- "$1" 2>/dev/null || die EACCES
  echo created ;;
rm)
  exists "$1" || die ENOENT
  parent "$1"; [ -w "$d" ] || die EACCES
  $B rm -rf -- "$1" 2>/dev/null || die EACCES ;;
mv)
  exists "$1" || die ENOENT
  parent "$2"; [ -w "$d" ] || die EACCES
  if [ -d "$2" ] && [ ! -L "$2" ] && [ ! -d "$1" ]; then die EISDIR; fi
  e=$($B mv -f -T -- "$1" "$2" 2>&1) || case $e in *"ot empty"*|*"xists"*) die EEXIST ;; *) die EACCES ;; esac
  hex "$d"; batch "$2" ;;
ln)
  parent "$2"
  if [ -d "$2" ] && [ ! -L "$2" ]; then die EISDIR; fi
  [ -w "$d" ] || die EACCES
  $B ln -sfn -- "$1" "$2" 2>/dev/null || die EACCES ;;
*) die EIO ;;
esac
`;
