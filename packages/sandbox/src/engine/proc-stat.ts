/**
 * The one reader of `/proc/<pid>/stat` (proc(5)): the fields the sandbox uses, parsed after the
 * parenthesised command name (which may itself contain spaces and parentheses, hence the last `)`).
 */
import { readFileSync } from 'node:fs';

/** Fields of `/proc/<pid>/stat` (proc(5) numbering in brackets). */
export interface ProcStat {
  /** Process id [1]. */
  pid: number;
  /** Command name without the parentheses [2] (at most 15 bytes, as the kernel keeps it). */
  comm: string;
  /** State letter [3]: `R`, `S`, `D`, `T`, `t`, `Z` (zombie), `X` (dead), `I`, … */
  state: string;
  /** Parent process id [4]. */
  ppid: number;
  /** CPU time in user mode [14], clock ticks. */
  utime: number;
  /** CPU time in kernel mode [15], clock ticks. */
  stime: number;
  /** Start time after boot [22], clock ticks. */
  starttime: number;
}

/** Clock ticks per second of the stat times (`getconf CLK_TCK`: 100 on Linux x86_64 and arm64). */
export const CLK_TCK = 100;

/** The parsed stat line of `pid`, or null when the process does not exist (or the file cannot be read). */
export function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  return parseProcStat(text);
}

/** Parses one `/proc/<pid>/stat` line; null when it is not one. */
export function parseProcStat(text: string): ProcStat | null {
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  if (open < 0 || close < open) return null;
  // After ") ": field 3 (state) is index 0, so field N is index N - 3.
  const f = text
    .slice(close + 2)
    .trimEnd()
    .split(' ');
  if (f.length < 20) return null;
  return {
    pid: Number(text.slice(0, open).trim()),
    comm: text.slice(open + 1, close),
    state: f[0]!,
    ppid: Number(f[1]),
    utime: Number(f[11]),
    stime: Number(f[12]),
    starttime: Number(f[19]),
  };
}

/** True when `pid` exists and is neither a zombie (`Z`) nor dead (`X`): it has not exited. */
export function processRuns(pid: number): boolean {
  const stat = readProcStat(pid);
  return stat !== null && stat.state !== 'Z' && stat.state !== 'X';
}

/**
 * `pid:starttime` of a process, from `/proc/<pid>/stat`; null when the process does not exist or has
 * exited and is not yet reaped (a zombie: a box whose init is one is not running).
 */
export function processIdentity(pid: number): string | null {
  const stat = readProcStat(pid);
  if (!stat || stat.state === 'Z' || stat.state === 'X') return null;
  return `${pid}:${stat.starttime}`;
}

/** True while the process identified by `owner` (`pid:starttime`) still runs. */
export function ownerAlive(owner: string): boolean {
  const pid = Number(owner.split(':')[0]);
  return Number.isInteger(pid) && pid > 0 && processIdentity(pid) === owner;
}
