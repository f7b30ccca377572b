/**
 * Choice of the gVisor platform (how the user-space kernel intercepts the box's system calls):
 * `kvm` (hardware virtualization, faster syscalls) when `/dev/kvm` works, else `ptrace`.
 *
 * On some hosts `/dev/kvm` opens but the KVM platform never boots (nested virtualization: the
 * sandbox hangs for good). The choice is therefore made by a probe — `runsc --platform=kvm do
 * /bin/true` — that must exit 0 within `KVM_PROBE_TIMEOUT_MS`, else the probe's processes are
 * killed and `ptrace` is chosen. The result is cached per boot in `<stateRoot>/runsc-platform.json`
 * (keyed by `/proc/sys/kernel/random/boot_id`), so the probe runs once per machine boot.
 */
import { spawn } from 'node:child_process';
import {
  accessSync,
  constants,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { BoxError } from '../errors.ts';

/** gVisor platforms the tier can run on. */
export type GVisorPlatform = 'ptrace' | 'kvm';

/** How long the KVM probe may take before KVM is declared unusable, ms. */
export const KVM_PROBE_TIMEOUT_MS = 3000;

/** The platform chosen and why (shown in `JsBoxInfo.isolation` and the engine's logs). */
export interface GVisorPlatformChoice {
  platform: GVisorPlatform;
  /** Human-readable reason, e.g. `kvm probe timed out after 3000 ms`. */
  reason: string;
}

/** Env override of the platform (`ptrace` or `kvm`); skips the probe. */
export const PLATFORM_ENV = 'SEED_SANDBOX_GVISOR_PLATFORM';

function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

/**
 * Checks a platform name.
 * @throws BoxError naming `field` unless it is `ptrace` or `kvm`.
 */
export function checkPlatform(value: unknown, field: string): GVisorPlatform {
  if (value !== 'ptrace' && value !== 'kvm') {
    throw new BoxError(`${field}: '${String(value)}' must be 'ptrace' or 'kvm'`, {
      field,
      code: 'invalid_option',
    });
  }
  return value;
}

/** Kills (SIGKILL) every process whose command line names `marker` (the probe's private `--root`). */
function killProcessesNaming(marker: string): void {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(marker)) {
        process.kill(Number(entry), 'SIGKILL');
      }
    } catch {}
  }
}

/**
 * Runs the KVM probe: `runsc --root <tmp> --platform=kvm --network=none do /bin/true` in its own
 * process group. Resolves `booted` when it exits 0 within `timeoutMs`, `failed` when it exits
 * otherwise; on `timeout` its process group and every process started with its private `--root` are
 * killed. Never hangs.
 */
export function probeKvm(
  runsc: string,
  scratchDir: string,
  timeoutMs = KVM_PROBE_TIMEOUT_MS,
): Promise<'booted' | 'failed' | 'timeout'> {
  const root = mkdtempSync(join(scratchDir, 'kvm-probe-'));
  return new Promise((resolve) => {
    const child = spawn(runsc, ['--root', root, '--platform=kvm', '--network=none', 'do', '/bin/true'], {
      detached: true,
      stdio: 'ignore',
    });
    let settled = false;
    const finish = (result: 'booted' | 'failed' | 'timeout') => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (result !== 'booted' && child.pid) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {}
      }
      if (result !== 'booted') killProcessesNaming(root);
      rmSync(root, { recursive: true, force: true });
      resolve(result);
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    child.on('error', () => finish('failed'));
    child.on('exit', (code) => finish(code === 0 ? 'booted' : 'failed'));
  });
}

/**
 * Chooses the platform: `wanted` (option) or `$SEED_SANDBOX_GVISOR_PLATFORM` when set; else
 * `ptrace` when `/dev/kvm` cannot be opened read-write; else the cached result of this boot's KVM
 * probe; else the probe (at most `KVM_PROBE_TIMEOUT_MS`), whose result is cached in `stateRoot`.
 * @throws BoxError when `wanted` or the env value is neither `ptrace` nor `kvm`.
 */
export async function chooseGVisorPlatform(
  runsc: string,
  stateRoot: string,
  wanted?: GVisorPlatform,
): Promise<GVisorPlatformChoice> {
  if (wanted !== undefined)
    return { platform: checkPlatform(wanted, 'gvisorPlatform'), reason: 'configured' };
  const env = process.env[PLATFORM_ENV];
  if (env) return { platform: checkPlatform(env, PLATFORM_ENV), reason: `configured by ${PLATFORM_ENV}` };
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK);
  } catch {
    return { platform: 'ptrace', reason: '/dev/kvm is not available' };
  }
  const cacheFile = join(stateRoot, 'runsc-platform.json');
  const boot = bootId();
  try {
    const cached = JSON.parse(readFileSync(cacheFile, 'utf8')) as GVisorPlatformChoice & { bootId: string };
    if (cached.bootId === boot && (cached.platform === 'kvm' || cached.platform === 'ptrace')) {
      return { platform: cached.platform, reason: cached.reason };
    }
  } catch {}
  const t0 = performance.now();
  const result = await probeKvm(runsc, stateRoot);
  const ms = Math.round(performance.now() - t0);
  const choice: GVisorPlatformChoice =
    result === 'booted'
      ? { platform: 'kvm', reason: `kvm probe booted in ${ms} ms` }
      : result === 'failed'
        ? { platform: 'ptrace', reason: `kvm probe failed after ${ms} ms` }
        : { platform: 'ptrace', reason: `kvm probe did not boot within ${KVM_PROBE_TIMEOUT_MS} ms` };
  writeFileSync(cacheFile, JSON.stringify({ ...choice, bootId: boot }));
  return choice;
}
