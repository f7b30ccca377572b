/**
 * Tunnels into gVisor boxes: a box's sockets live in the Sentry's netstack, which no host namespace
 * reaches, so a tunnel to a port in the box is a relay run inside it with `runsc exec`. This module
 * records which host pid is the sandbox of which box (filled by the gVisor engines of this process)
 * and builds the relay's command line (used by network/tunnel.ts).
 */

/**
 * The line a tunnel relay writes on stderr once it is connected (socat's own, so one reader serves
 * both relays; network/tunnel.ts).
 */
export const TUNNEL_READY_LINE = 'starting data transfer loop';

/** Host pid of a gVisor sandbox → how to run a command in it (filled by the gVisor engines of this process). */
const sandboxes = new Map<number, { rt: string[]; id: string }>();

/** Records that host pid `pid` is the sandbox of box `id`, driven with the runsc command line `rt`. */
export function registerSandbox(pid: number, rt: string[], id: string): void {
  sandboxes.set(pid, { rt, id });
}

/** Forgets the sandbox of box `id` (stopped or removed). */
export function forgetSandbox(id: string): void {
  for (const [pid, s] of sandboxes) if (s.id === id) sandboxes.delete(pid);
}

/**
 * The command that relays its stdin/stdout to TCP `127.0.0.1:port` inside the gVisor box whose
 * sandbox has host pid `pid`, or undefined when `pid` is no gVisor sandbox this process started or
 * looked up. A box's sockets live in the Sentry's netstack, which no host namespace reaches, so the
 * relay runs in the box (`runsc exec`): the host's static busybox (bound at `/.sandbox/busybox`)
 * connects with `nc` and, once connected, writes `TUNNEL_READY_LINE` on stderr and copies the
 * socket to the caller's stdout and the caller's stdin to the socket (descriptors 3 and 4 keep the
 * caller's stdio across `nc -e`). A refused connection ends it with busybox's message and exit 1.
 * The host side learns the box from this process's own records, never from the sandbox process.
 */
export function gvisorTunnelCommand(pid: number, port: number): string[] | undefined {
  const sandbox = sandboxes.get(pid);
  if (!sandbox || !Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  const bb = '/.sandbox/busybox';
  const relay = `echo '${TUNNEL_READY_LINE}' >&2; ${bb} cat <&3 & exec ${bb} cat >&4`;
  return [
    ...sandbox.rt,
    'exec',
    sandbox.id,
    bb,
    'sh',
    '-c',
    `exec 3<&0 4>&1; exec ${bb} nc 127.0.0.1 ${port} -e ${bb} sh -c "${relay}"`,
  ];
}
