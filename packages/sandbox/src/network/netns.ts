/**
 * Host-side helpers acting in network namespaces (a box's `/proc/<pid>/ns/net`, or its gateway's
 * namespace file): running a program inside one with `nsenter`, and slirp4netns (user-mode
 * networking) with its API socket for host port forwards. Root only (the engine runs as root).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { BoxError } from '../errors.ts';

/** Address of a box's `eth0` (on 10.0.2.0/24, the link to its gateway namespace). */
export const GUEST_IP = '10.0.2.100';
/** The box's `nameserver`: an address of its gateway, which passes DNS on (see `gateway.ts`). */
export const SLIRP_DNS_IP = '10.0.2.3';

/**
 * Runs `cmd args` inside a network namespace: that of process `target` (a pid), or the namespace
 * file `target` (a path). Resolves stdout, rejects with its stderr.
 */
export function inNetns(
  target: number | string,
  cmd: string,
  args: string[],
  input?: string,
): Promise<string> {
  const ns = typeof target === 'number' ? `/proc/${target}/ns/net` : target;
  return new Promise((resolve, reject) => {
    const child = spawn('nsenter', [`--net=${ns}`, '--', cmd, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.stdin.on('error', () => {}); // a program that reads no input may exit before it is written
    child.on('close', (code) => {
      if (code === 0) resolve(Buffer.concat(out).toString());
      else
        reject(
          new Error(`${cmd} ${args.join(' ')} failed (${code}): ${Buffer.concat(err).toString().trim()}`),
        );
    });
    child.stdin.end(input ?? '');
  });
}

/** Options of `startSlirp`. */
export interface SlirpOptions {
  /** Network namespace file (the box's gateway namespace) that gets `tap0`. */
  netns: string;
  /**
   * slirp4netns's network (`--cidr`): its host is `.2`, its DNS `.3`, the namespace `.100`; absent:
   * slirp4netns's default 10.0.2.0/24.
   */
  cidr?: string;
  /** Path of the API socket (at most 107 bytes). */
  apiSocket: string;
  /** File receiving slirp4netns's own log. */
  logFile: string;
  /** Refuse connections to the host's 127.0.0.1 through slirp4netns's host address. */
  disableHostLoopback: boolean;
  /** Turn slirp4netns's DNS forwarder off (the box's DNS goes to a resolver of its own). */
  disableDns?: boolean;
  /** Exit when the calling process exits (for boxes stopped with their parent); else outlive it. */
  exitWithParent: boolean;
  /**
   * Run slirp4netns as root of the user namespace of this process (a rootless box's init, through
   * `nsenter --user`), still in the calling process's network namespace for its outside sockets: its
   * `--enable-sandbox` switches to uid/gid 0, which an ordinary account cannot outside it.
   */
  usernsOf?: number;
  /**
   * Start it at this niceness (`nice -n`, 0-19; the network helper's spare gateways start at 19 and
   * are set back to 0 when a box takes one); absent: the caller's.
   */
  nice?: number;
}

/**
 * Starts slirp4netns for a namespace file (`--configure`: `tap0` at `.100` of `cidr`, default route
 * via `.2`, MTU 65520; `--enable-sandbox --enable-seccomp`; as root under `unshare --mount
 * --propagation private`, so its sandbox's unmounts stay off the host's mounts whether `/run/netns`
 * is shared or not) in its own session, so it outlives the
 * calling process (detached boxes keep their published ports). Resolves with its pid once the
 * interface is configured (its `--ready-fd` reports).
 * @throws Error with the end of its log (≤ 400 characters) when slirp4netns exits before that.
 */
export function startSlirp(options: SlirpOptions): Promise<number> {
  const log = openSync(options.logFile, 'a');
  const args = [
    '--configure',
    '--mtu=65520',
    '--ready-fd=3',
    `--api-socket=${options.apiSocket}`,
    ...(options.cidr !== undefined ? [`--cidr=${options.cidr}`] : []),
    '--netns-type=path',
    // slirp4netns parses everything the box sends: once set up it runs in an empty mount namespace,
    // with every capability but NET_BIND_SERVICE dropped and a seccomp filter of its own.
    '--enable-sandbox',
    '--enable-seccomp',
  ];
  if (options.disableHostLoopback) args.push('--disable-host-loopback');
  if (options.disableDns) args.push('--disable-dns');
  // fd 4: a socket whose other end only this process holds; its EOF makes slirp4netns exit.
  if (options.exitWithParent) args.push('--exit-fd=4');
  args.push(options.netns, 'tap0');
  // `--enable-sandbox` unmounts the old root lazily after its pivot_root. As root, slirp4netns starts
  // in a mount namespace of its own with every mount private, so that unmount never reaches the
  // host's mounts: a shared `/run/netns` (after any `ip netns add`) would carry it to every gateway's
  // nsfs mount. In a box's user namespace the kernel turns shared mounts into slaves already.
  const [command, ...prefix] =
    options.usernsOf !== undefined
      ? ['nsenter', `--user=/proc/${options.usernsOf}/ns/user`, '--', 'slirp4netns']
      : ['unshare', '--mount', '--propagation', 'private', '--', 'slirp4netns'];
  const niced = options.nice !== undefined ? ['nice', '-n', String(options.nice)] : [];
  const [program, ...rest] = [...niced, command!, ...prefix, ...args];
  let child: ChildProcess;
  try {
    child = spawn(program!, rest, {
      stdio: ['ignore', log, log, 'pipe', options.exitWithParent ? 'pipe' : 'ignore'],
      detached: true,
    });
  } finally {
    closeSync(log);
  }
  return new Promise((resolve, reject) => {
    const ready = child.stdio[3] as NodeJS.ReadableStream;
    let done = false;
    const finish = (error?: Error) => {
      if (done) return;
      done = true;
      ready.removeAllListeners();
      (ready as unknown as { destroy(): void }).destroy();
      child.removeAllListeners('exit');
      child.unref();
      (child.stdio[4] as unknown as { unref?: () => void } | null)?.unref?.();
      if (error) {
        if (child.pid) {
          try {
            process.kill(child.pid, 'SIGKILL');
          } catch {}
        }
        reject(error);
      } else resolve(child.pid!);
    };
    ready.on('data', () => finish());
    child.on('error', (e) => finish(e));
    child.on('exit', (code) => {
      let log = '';
      try {
        log = readFileSync(options.logFile, 'utf8').trim().slice(-400);
      } catch {}
      finish(new Error(`slirp4netns exited (${code}): ${log}`));
    });
  });
}

/** One call on the slirp4netns API socket (JSON request, JSON reply). */
export function slirpApi(apiSocket: string, request: object): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const socket = connect(apiSocket);
    const chunks: Buffer[] = [];
    socket.on('connect', () => socket.end(JSON.stringify(request)));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      try {
        const reply = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
        if (reply.error) {
          const desc = (reply.error as { desc?: string }).desc ?? JSON.stringify(reply.error);
          reject(new BoxError(`slirp4netns: ${desc}`, { code: 'internal' }));
        } else resolve(reply);
      } catch (e) {
        reject(
          new BoxError(`slirp4netns API: unreadable reply (${(e as Error).message})`, { code: 'internal' }),
        );
      }
    });
  });
}

/**
 * Adds a host TCP forward `hostIp:hostPort` → `guestAddr:guestPort` (the gateway's slirp address; the
 * gateway passes it on to the box); returns slirp4netns's forward id.
 */
export async function addHostForward(
  apiSocket: string,
  hostIp: string,
  hostPort: number,
  guestAddr: string,
  guestPort: number,
): Promise<number> {
  const reply = await slirpApi(apiSocket, {
    execute: 'add_hostfwd',
    arguments: {
      proto: 'tcp',
      host_addr: hostIp,
      host_port: hostPort,
      guest_addr: guestAddr,
      guest_port: guestPort,
    },
  });
  return Number((reply.return as { id?: number } | undefined)?.id ?? -1);
}
