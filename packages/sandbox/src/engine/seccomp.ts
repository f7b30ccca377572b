/**
 * The default seccomp profile of a box, as data (OCI runtime-spec `linux.seccomp`).
 *
 * A deny-list modelled on Docker's default profile: every syscall is allowed except those that
 * reach the host kernel's global state (modules, kexec, reboot, swap, clock, keyrings, BPF, perf,
 * new mount API, handle-based opens, namespace creation), which fail with `EPERM`. `clone3` fails
 * with `ENOSYS` so libc falls back to `clone`, whose namespace flags are then filtered by argument
 * (the same trick Docker uses). Capabilities granted with `advanced.capabilities.add` re-enable the
 * syscalls they exist for (as Docker does), e.g. `SYS_ADMIN` → mount family, `SYS_TIME` → clocks.
 *
 * Sockets that hand-make frames or packets are refused by argument (`socket(2)`): `AF_PACKET` and
 * `AF_XDP` always, `SOCK_RAW` and the obsolete `SOCK_PACKET` on `AF_INET`/`AF_INET6` unless `NET_RAW`
 * was added (then `ping`-style raw IP sockets work; what they send still passes the host-side network
 * policy, see `src/network/`). The capability check of the kernel refuses the same sockets without
 * `NET_RAW`; these rules keep them refused if a box gains the capability some other way. On 32-bit
 * x86 the multiplexed `socketcall(2)` cannot be filtered by argument: there the capability is the guard.
 */

/** An OCI `LinuxSeccomp` object (runtime-spec config-linux.md "Seccomp"). */
export interface OciSeccomp {
  defaultAction: string;
  architectures: string[];
  syscalls: {
    names: string[];
    action: string;
    errnoRet?: number;
    args?: { index: number; value: number; valueTwo?: number; op: string }[];
  }[];
}

const EPERM = 1;
const ENOSYS = 38;

/** Syscalls always denied (EPERM), whatever the capabilities. */
const ALWAYS_DENIED = [
  'acct',
  'add_key',
  'request_key',
  'keyctl',
  'kexec_load',
  'kexec_file_load',
  'create_module',
  'init_module',
  'finit_module',
  'delete_module',
  'get_kernel_syms',
  'query_module',
  'nfsservctl',
  'uselib',
  'userfaultfd',
  'vm86',
  'vm86old',
  '_sysctl',
  'lookup_dcookie',
  'open_by_handle_at',
  'name_to_handle_at',
  'io_uring_setup',
  'io_uring_enter',
  'io_uring_register',
];

/** Syscalls denied unless the named capability was added to the box. */
const DENIED_UNLESS: Record<string, string[]> = {
  CAP_SYS_ADMIN: [
    'mount',
    'umount',
    'umount2',
    'pivot_root',
    'setns',
    'unshare',
    'quotactl',
    'quotactl_fd',
    'fsopen',
    'fsconfig',
    'fsmount',
    'fspick',
    'move_mount',
    'open_tree',
    'mount_setattr',
    'fanotify_init',
    'bpf',
    'perf_event_open',
    'syslog',
  ],
  CAP_SYS_BOOT: ['reboot'],
  CAP_SYS_MODULE: [],
  CAP_SYS_TIME: [
    'settimeofday',
    'stime',
    'clock_settime',
    'clock_settime64',
    'clock_adjtime',
    'clock_adjtime64',
    'adjtimex',
  ],
  CAP_SYS_RAWIO: ['iopl', 'ioperm'],
  CAP_SYS_PACCT: [],
  CAP_SYS_PTRACE: ['kcmp', 'process_madvise'],
  CAP_SYS_NICE: [],
  CAP_SYSLOG: [],
};

/** Address families (socket.h) and socket types (net.h) of the `socket(2)` rules. */
const AF_INET = 2;
const AF_INET6 = 10;
const AF_PACKET = 17;
const AF_XDP = 44;
const SOCK_RAW = 3;
const SOCK_PACKET = 10;
/** The type argument also carries `SOCK_NONBLOCK`/`SOCK_CLOEXEC`; the socket type is its low bits. */
const SOCK_TYPE_MASK = 0xf;

/** `socket(2)` rules: hand-made frames/packets (see the module comment). */
function socketRules(capabilities: readonly string[]): OciSeccomp['syscalls'] {
  const deny = (args: NonNullable<OciSeccomp['syscalls'][number]['args']>) => ({
    names: ['socket'],
    action: 'SCMP_ACT_ERRNO',
    errnoRet: EPERM,
    args,
  });
  const rules = [AF_PACKET, AF_XDP].map((family) => deny([{ index: 0, value: family, op: 'SCMP_CMP_EQ' }]));
  const types = capabilities.includes('CAP_NET_RAW') ? [SOCK_PACKET] : [SOCK_RAW, SOCK_PACKET];
  for (const family of [AF_INET, AF_INET6]) {
    for (const type of types) {
      rules.push(
        deny([
          { index: 0, value: family, op: 'SCMP_CMP_EQ' },
          { index: 1, value: SOCK_TYPE_MASK, valueTwo: type, op: 'SCMP_CMP_MASKED_EQ' },
        ]),
      );
    }
  }
  return rules;
}

/** CLONE_NEW* flags (sched.h): cgroup, uts, ipc, user, pid, net. CLONE_NEWNS is 0x00020000. */
const CLONE_NAMESPACE_FLAGS = [
  0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00020000,
];

/**
 * Builds the box's seccomp profile for its effective capability list (`CAP_` names).
 * Returns a fresh object (safe to mutate).
 */
export function defaultSeccompProfile(capabilities: readonly string[]): OciSeccomp {
  const denied = [...ALWAYS_DENIED];
  for (const [cap, names] of Object.entries(DENIED_UNLESS)) {
    if (!capabilities.includes(cap)) denied.push(...names);
  }
  const syscalls: OciSeccomp['syscalls'] = [
    { names: denied, action: 'SCMP_ACT_ERRNO', errnoRet: EPERM },
    { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS },
    ...socketRules(capabilities),
  ];
  if (!capabilities.includes('CAP_SYS_ADMIN')) {
    // x86_64 clone(flags, ...): flags are argument 0. One rule per flag (rules are OR-ed).
    for (const flag of CLONE_NAMESPACE_FLAGS) {
      syscalls.push({
        names: ['clone'],
        action: 'SCMP_ACT_ERRNO',
        errnoRet: EPERM,
        args: [{ index: 0, value: flag, valueTwo: flag, op: 'SCMP_CMP_MASKED_EQ' }],
      });
    }
  }
  return {
    defaultAction: 'SCMP_ACT_ALLOW',
    architectures:
      process.arch === 'arm64'
        ? ['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']
        : ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'],
    syscalls,
  };
}
