/**
 * Networking of rootless boxes, the counterpart of `network/manager.ts` for an ordinary
 * account, with the same surface for the runtime (`prepare`, `hooks`, `publishedPorts`, `teardown`):
 *
 * - `disabled`: nothing is added; the box has only `lo`.
 * - `enabled`: slirp4netns (rootless by design), run as root of the box's user namespace (so that its
 *   `--enable-sandbox` may drop to its own empty mount namespace) and still in the host's network
 *   namespace, gives the box `tap0` (10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3);
 *   `--disable-host-loopback` unless `allowNet` names the host. An nftables ruleset in the box's
 *   namespace, loaded by the caller as root of the box's user namespace before `start` resolves,
 *   refuses the host's own addresses and, with a non-empty `allowNet`, everything not listed
 *   (hostnames are resolved once, at start; `*.` wildcard rules are refused rootless). The box
 *   cannot change the ruleset: it has no `NET_ADMIN` (adding it is refused with `allowNet`), and its
 *   seccomp profile refuses packet sockets.
 * - `ports`: slirp4netns host forwards, listeners of the caller's own account; a host port below
 *   `net.ipv4.ip_unprivileged_port_start` is refused with a `BoxError` naming `ports[i].hostPort`.
 * - `secrets` (the substituting proxy) are refused rootless with a `BoxError` naming `secrets`.
 */
import { spawn } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { EngineNetworkContext } from '../engine/engine.ts';
import { processRuns } from '../engine/proc-stat.ts';
import { unprivilegedPortStart } from '../engine/rootless-host.ts';
import { BoxError } from '../errors.ts';
import { type BoxNetworkConfig, SlirpNetworking } from './box-networking.ts';
import { hostIpv4Addresses } from './destinations.ts';
import { GUEST_IP, SLIRP_DNS_IP, startSlirp } from './netns.ts';
import { allowsHostLoopback, HOST_LOOPBACK_IP, HOST_LOOPBACK_NAME, parseAllowNet } from './policy.ts';

/** Runs `argv` in the box's user and network namespaces (as their root), `input` on stdin. */
function inBoxNet(pid: number, argv: string[], input = ''): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'nsenter',
      [`--user=/proc/${pid}/ns/user`, `--net=/proc/${pid}/ns/net`, '--', ...argv],
      {
        stdio: ['pipe', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.stdin.on('error', () => {});
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${argv[0]}: ${stderr.trim()}`))));
    child.stdin.end(input);
  });
}

/** nftables ruleset of a box (see the module comment). `allowed`: undefined for an open policy. */
export function rootlessRules(hostAddresses: string[], allowed: string[] | undefined): string {
  const v4 = (list: string[]) => list.filter((a) => isIP(a.split('/')[0]!) === 4);
  const v6 = (list: string[]) => list.filter((a) => isIP(a.split('/')[0]!) === 6);
  const lines = [
    'table inet sandbox {',
    '  chain output {',
    '    type filter hook output priority 0; policy accept;',
    '    oif "lo" accept',
    '    ct state established,related accept',
    `    ip daddr ${SLIRP_DNS_IP} meta l4proto { tcp, udp } th dport 53 accept`,
  ];
  const hosts = v4(hostAddresses).filter((a) => !(allowed ?? []).includes(a));
  if (hosts.length > 0) lines.push(`    ip daddr { ${hosts.join(', ')} } reject`);
  if (allowed !== undefined) {
    if (v4(allowed).length > 0) lines.push(`    ip daddr { ${v4(allowed).join(', ')} } accept`);
    if (v6(allowed).length > 0) lines.push(`    ip6 daddr { ${v6(allowed).join(', ')} } accept`);
    lines.push('    meta l4proto tcp reject with tcp reset', '    reject');
  }
  lines.push('  }', '}');
  return `${lines.join('\n')}\n`;
}

/** Networking of a rootless runtime's boxes; per-box state in `<stateDir>/<id>.{pid,sock,log}`. */
export class RootlessNetworking extends SlirpNetworking {
  /**
   * Records ports, secrets and detach for the next start of box `id`.
   * @throws BoxError `unsupported` naming `secrets` when there are any; `ports[i].hostPort` below
   *   the host's unprivileged port start.
   */
  override prepare(id: string, config: BoxNetworkConfig): void {
    if (config.secrets.length > 0) {
      throw new BoxError('secrets: the substituting proxy needs root; not available to an ordinary account', {
        field: 'secrets',
        code: 'unsupported',
      });
    }
    const start = unprivilegedPortStart();
    config.ports.forEach((p, i) => {
      if (p.hostPort !== undefined && p.hostPort !== 0 && p.hostPort < start) {
        throw new BoxError(
          `invalid box option ports[${i}].hostPort: ${p.hostPort} is below ${start} (net.ipv4.ip_unprivileged_port_start), which an ordinary account cannot listen on; use a port ≥ ${start} or omit hostPort`,
          { field: `ports[${i}].hostPort` },
        );
      }
    });
    super.prepare(id, config);
  }

  /** The `networkSetup`/`networkTeardown` hooks of the engine. */
  hooks(): {
    networkSetup: (ctx: EngineNetworkContext) => Promise<void>;
    networkTeardown: (id: string) => Promise<void>;
  } {
    return { networkSetup: (ctx) => this.setup(ctx), networkTeardown: (id) => this.teardown(id) };
  }

  /** Sets up the box's network (see the module comment); rejects when slirp4netns or the rules fail. */
  async setup(ctx: EngineNetworkContext): Promise<void> {
    const config = this.takeConfig(ctx);
    if (config === null) return;
    const policy = parseAllowNet(ctx.network.allowNet);
    let allowed: string[] | undefined;
    if (!policy.open) {
      if (policy.suffixes.length > 0) {
        throw new BoxError(
          'network.allowNet: wildcard (*.) rules need root; list exact hostnames or addresses',
          {
            field: 'network.allowNet',
            code: 'unsupported',
          },
        );
      }
      allowed = [...policy.cidrs];
      for (const name of policy.names) {
        if (name === HOST_LOOPBACK_NAME) continue; // admitted below, as 10.0.2.2
        try {
          for (const { address } of await lookup(name, { all: true })) allowed.push(address);
        } catch (error) {
          throw new BoxError(`network.allowNet: cannot resolve '${name}': ${(error as Error).message}`, {
            field: 'network.allowNet',
          });
        }
      }
      if (allowsHostLoopback(policy)) allowed.push(HOST_LOOPBACK_IP);
    }
    rmSync(this.file(ctx.id, 'sock'), { force: true });
    const pid = await startSlirp({
      netns: `/proc/${ctx.pid}/ns/net`,
      apiSocket: this.file(ctx.id, 'sock'),
      logFile: this.file(ctx.id, 'log'),
      disableHostLoopback: !allowsHostLoopback(policy),
      exitWithParent: !config.detach,
      usernsOf: ctx.pid,
    });
    writeFileSync(this.file(ctx.id, 'pid'), `${pid}\n`);
    writeFileSync(join(ctx.boxDir, 'bundle', 'slirp.pid'), `${pid}\n`);
    await inBoxNet(ctx.pid, ['nft', '-f', '-'], rootlessRules(hostIpv4Addresses(), allowed));
    await this.publish(ctx.id, config.ports, GUEST_IP);
  }

  /** Ends slirp4netns of box `id` and removes its state files. Idempotent. */
  async teardown(id: string): Promise<void> {
    this.forget(id);
    try {
      const pid = Number.parseInt(readFileSync(this.file(id, 'pid'), 'utf8'), 10);
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (pid > 0 && processRuns(pid) && cmdline.startsWith('slirp4netns')) process.kill(pid, 'SIGKILL');
    } catch {}
    for (const ext of ['pid', 'sock', 'log']) rmSync(this.file(id, ext), { force: true });
  }
}
