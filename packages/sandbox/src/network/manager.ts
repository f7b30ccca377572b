/**
 * Networking of local boxes (spec 002 `NetworkSpec`, `JsPortSpec`, `Secret`, `JsNetworkInfo`): the
 * engine's `networkSetup`/`networkTeardown` hooks. Every box has its own network namespace:
 *
 * - `disabled`: nothing is added; the box has only `lo`.
 * - `enabled`: the box gets `eth0` (10.0.2.100/24, gateway 10.0.2.2, DNS 10.0.2.3), a veth link to a
 *   gateway namespace of its own (`gateway.ts`) where slirp4netns provides user-mode outbound TCP/UDP
 *   through the host and an nftables ruleset enforces the policy: the host (its loopback through
 *   10.0.2.2, its other addresses, link-local) is not a destination unless `allowNet` names it, and
 *   with a non-empty `allowNet` nothing unlisted is. The box cannot go around it: it has no handle on
 *   the gateway namespace, and even hand-made frames only leave through it. Refusals are immediate
 *   (TCP reset, ICMP port unreachable): nothing hangs.
 * - DNS: a per-box resolver on the host (`dns.ts`) answers only listed names (every name for an empty
 *   `allowNet`) and admits their resolved IPs in the gateway before answering.
 * - `ports`: slirp4netns host forwards (`hostIp:hostPort` → the gateway → box port), persistent
 *   listeners owned by slirp4netns, so they live exactly as long as the box's network.
 * - `secrets`: a per-box HTTP(S) proxy with its own CA (`secrets.ts`) substitutes placeholders.
 *
 * slirp4netns runs in its own session: for a detached box it outlives this process (published ports
 * stay), for other boxes it ends with this process (started here: through its exit fd; taken from a
 * spare of the network helper: the helper ends it once the box's supervisor removed the gateway name).
 * Its pid is kept in `<stateDir>/<id>.json` and the gateway namespace is `/run/netns/sbx-<id>` (a
 * bind-mounted file, or a link to a spare's), so any process can tear the network down. The resolver, the secrets proxy and the policy live in the network helper of the
 * state directory (`helper.ts`, one process per runtime home, started on demand), not in this process:
 * a box keeps its policy after the process that created it exits, and `update` changes it while the
 * box runs. While the helper restarts, name resolution and the proxy fail closed (no answer, refused);
 * they never fall back to open access. The helper also gives the box its gateway when it registers:
 * a spare made ahead (`spares.ts`: namespace, slirp4netns, ruleset; this process then spawns nothing
 * for the box's host side), or, when none is ready, a namespace made then with its ruleset, this
 * process starting slirp4netns (each spawn blocks this process's event loop for a few ms while it
 * starts the box).
 */
import { readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readFileInRoot, writeFileInRoot } from '../engine/confined.ts';
import type { EngineNetworkContext } from '../engine/engine.ts';
import type { EngineLinkScript } from '../engine/engine-options.ts';
import type { GVisorNetnsContext } from '../engine/gvisor-netns.ts';
import type { JsPublishedPort } from '../types.ts';
import { linkBox, linkScript } from './box-link.ts';
import { type BoxNetworkConfig, type SecretRule, SlirpNetworking } from './box-networking.ts';
import { SLIRP_CIDR } from './destinations.ts';
import { gatewayName, NETNS_DIR, removeGatewayNamespace, SLIRP_GUEST_IP } from './gateway.ts';
import type { HelperAnswer } from './helper.ts';
import { callHelper, helperDir, resumeHelper } from './helper-client.ts';
import { SLIRP_DNS_IP, startSlirp } from './netns.ts';
import { HOST_LOOPBACK_IP, parseAllowNet } from './policy.ts';

/** Port the box uses for the secrets proxy (`http://10.0.2.2:3128`); redirected to the real one. */
export const PROXY_GUEST_PORT = 3128;
/** Where the per-box CA certificate is written in the box (PEM; the key never leaves the host). */
export const BOX_CA_PATH = '/etc/ssl/certs/sandbox-ca.pem';
const BUNDLE_PATHS = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/cert.pem',
];

/** A host side started before its box ran (`prepare`, `prepareNetns`), until `setup` takes it. */
interface Early {
  /** Resolves when the whole host side is up. */
  host: Promise<HostSide>;
  /** Resolves when the gateway namespace exists (the box can be linked to it then). */
  gateway: Promise<void>;
  /** Whether the box is linked already (`prepareNetns`); `setup` links it otherwise. */
  linked: boolean;
}

/** The network helper's answer to a box's registration (ports of its resolver and proxy, its CA). */
type Registration = Promise<Extract<HelperAnswer, { ok: true }>>;

/** What the host side of a box's network left for `setup` (see `BoxNetworking.setup`). */
interface HostSide {
  live: Live;
  persisted: Persisted;
}

interface Live {
  /** The box CA certificate (PEM) when the box has secrets. */
  caPem?: string;
}

interface Persisted {
  slirpPid: number;
  published: JsPublishedPort[];
}

/** Environment a box with secrets gets: the placeholders, the proxy and the CA bundle for common clients. */
export function secretsEnv(
  secrets: readonly Pick<SecretRule, 'name' | 'placeholder'>[],
): Record<string, string> {
  if (secrets.length === 0) return {};
  const proxy = `http://${HOST_LOOPBACK_IP}:${PROXY_GUEST_PORT}`;
  const env: Record<string, string> = {
    HTTPS_PROXY: proxy,
    https_proxy: proxy,
    HTTP_PROXY: proxy,
    http_proxy: proxy,
    NO_PROXY: 'localhost,127.0.0.1,::1',
    no_proxy: 'localhost,127.0.0.1,::1',
    NODE_EXTRA_CA_CERTS: BOX_CA_PATH,
    REQUESTS_CA_BUNDLE: BUNDLE_PATHS[0]!,
    SSL_CERT_FILE: BUNDLE_PATHS[0]!,
  };
  for (const s of secrets) env[s.name] = s.placeholder;
  return env;
}

function alive(pid: number, name: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!.endsWith(name);
  } catch {
    return false;
  }
}

/**
 * The network side of a local runtime. Hand `hooks()` to `createEngine`, call `prepare(id, config)`
 * before `engine.start`, and read `publishedPorts(id)` after it.
 */
export class BoxNetworking extends SlirpNetworking {
  readonly #helper: string;
  /**
   * Host sides started before the box ran that `setup` has not taken yet: by `prepare` (container
   * tier; `linked` false, `setup` links the box) or by `prepareNetns` (gVisor tier; box linked).
   */
  readonly #early = new Map<string, Early>();

  /** `stateDir`: where per-box network state (slirp4netns pid, API socket, log) is kept; short path. */
  constructor(options: { stateDir: string }) {
    super(options);
    this.#helper = helperDir(options.stateDir);
    resumeHelper(this.#helper);
  }

  /**
   * Records ports, secrets and detach for the next start of box `id`, and starts the host side of its
   * network at once when `config.network` is given and enabled.
   */
  override prepare(id: string, config: BoxNetworkConfig): void {
    super.prepare(id, config);
    if (config.network && config.network.mode !== 'disabled') {
      // The host side starts now, beside the box's mounts and runtime; `setup` awaits it.
      this.#startEarly(id, config.network, config);
    }
  }

  /** Starts box `id`'s host side (`#hostSide`) and records it for `setup`. */
  #startEarly(id: string, network: EngineNetworkContext['network'], config: BoxNetworkConfig): Early {
    const registered = this.#register(id, network, config);
    const gateway = registered.then(() => {});
    gateway.catch(() => {});
    const host = this.#hostSide(id, config, registered);
    host.catch(() => {});
    const early = { host, gateway, linked: false };
    this.#early.set(id, early);
    return early;
  }

  /**
   * The `networkSetup`/`networkTeardown`/`networkFiles` hooks of `CreateEngineOptions` (the gateway
   * namespace file is what a non-detached box's supervisor removes when its creator dies), and the
   * gVisor tier's `networkPrepare`.
   */
  hooks(): {
    networkPrepare: (ctx: GVisorNetnsContext) => Promise<void>;
    networkLinkScript: (id: string) => EngineLinkScript | undefined;
    networkSetup: (ctx: EngineNetworkContext) => Promise<void>;
    networkTeardown: (id: string) => Promise<void>;
    networkFiles: (id: string) => string[];
  } {
    return {
      networkPrepare: (ctx) => this.prepareNetns(ctx),
      networkLinkScript: (id) => this.linkScript(id),
      networkSetup: (ctx) => this.setup(ctx),
      networkTeardown: (id) => this.teardown(id),
      networkFiles: (id) => [join(NETNS_DIR, gatewayName(id))],
    };
  }

  /**
   * Waits for the gateway namespace (made by the network helper at registration) and makes the box's
   * link (`eth0` with its address and default route in the namespace file `ctx.netns`) before a gVisor
   * box starts, and resolves then: runsc hands the interfaces it finds at start to the Sentry's
   * netstack. The rest of the host side (slirp4netns, the helper's ruleset) goes on meanwhile, beside
   * runsc's start, and `setup` awaits it. The gateway forwards nothing until its ruleset is loaded (a new namespace does not
   * forward).
   * @throws Error when a namespace or link command fails.
   */
  async prepareNetns(ctx: GVisorNetnsContext): Promise<void> {
    const early = this.#early.get(ctx.id) ?? this.#startEarly(ctx.id, ctx.network, this.peekConfig(ctx.id));
    await early.gateway;
    await linkBox(gatewayName(ctx.id), ctx.netns);
    early.linked = true;
  }

  /**
   * The script that links box `id` to its gateway (gateway.ts `linkScript`), for the container
   * engine to run while crun sets the box up, and the gateway namespace it needs (the box runs only
   * once it exists); undefined when `prepare` started no host side for the box. `setup` then waits for
   * the engine's `ctx.linked` instead of linking the box itself.
   */
  linkScript(id: string): EngineLinkScript | undefined {
    const early = this.#early.get(id);
    if (!early || early.linked) return undefined;
    return { ready: early.gateway, script: linkScript(gatewayName(id)) };
  }

  /**
   * Sets up the box's network (see the module comment). Rejects (the engine then stops the box) when
   * slirp4netns or the firewall fails, or a requested host port is taken (`ports[i].hostPort`).
   */
  async setup(ctx: EngineNetworkContext): Promise<void> {
    const config = this.takeConfig(ctx);
    if (config === null) return;
    const early = this.#early.get(ctx.id);
    this.#early.delete(ctx.id);
    let host: HostSide;
    if (early) {
      // The link needs only the gateway namespace: it runs beside the rest of the host side.
      // The runtime's hook may have linked it already (`ctx.linked`, see `linkScript`).
      const [side, link] = await Promise.allSettled([
        early.host,
        ctx.linked ??
          (early.linked ? undefined : early.gateway.then(() => linkBox(gatewayName(ctx.id), ctx.pid))),
      ]);
      if (side.status === 'rejected') throw side.reason;
      if (link.status === 'rejected') throw link.reason;
      host = side.value;
    } else {
      host = await this.#hostSide(ctx.id, config, this.#register(ctx.id, ctx.network, config), ctx.pid);
    }
    this.#writeEtc(ctx.boxDir, host.live.caPem);
    host.persisted.published = await this.publish(ctx.id, config.ports, SLIRP_GUEST_IP);
    writeFileSync(this.file(ctx.id, 'json'), JSON.stringify(host.persisted));
  }

  /**
   * Registers box `id` with the network helper, which makes its gateway namespace beside its
   * resolver, proxy and CA and answers then (it loads the ruleset after answering: see `#hostSide`).
   * The spawns this takes (`unshare`, `nft`) run in the helper: each spawn blocks the spawning
   * process's event loop for a few ms, and this process is starting the box meanwhile.
   * @throws BoxError from the helper (`invalid_option`, `unavailable`, or the gateway's failure).
   */
  #register(id: string, network: EngineNetworkContext['network'], config: BoxNetworkConfig): Registration {
    const registered = callHelper(this.#helper, {
      op: 'register',
      id,
      allowNet: [...network.allowNet],
      secrets: config.secrets.map((s) => ({ ...s, hosts: [...s.hosts] })),
      gateway: true,
    });
    registered.catch(() => {});
    return registered;
  }

  /**
   * The host side of box `id`'s network once `registered` (`#register`) resolves: slirp4netns (unless
   * the helper's answer names the spare's: its API socket is then linked as `<id>.sock`), the
   * helper's ruleset load (`ready`) and, when `link` is the box init's pid, the box's link, at once
   * (the box sends nothing before start() resolves). Without `link` the link is the caller's
   * (`setup` or `prepareNetns`). slirp4netns is recorded before any failure is reported, so teardown
   * finds it.
   * @throws Error when the registration, slirp4netns, the link or the ruleset fails.
   */
  async #hostSide(
    id: string,
    config: BoxNetworkConfig,
    registered: Registration,
    link?: number,
  ): Promise<HostSide> {
    const gateway = gatewayName(id);
    const persisted: Persisted = { slirpPid: 0, published: [] };
    writeFileSync(this.file(id, 'json'), JSON.stringify(persisted));
    const answer = await registered;
    const live: Live = answer.caPem !== undefined ? { caPem: answer.caPem } : {};
    // A spare gateway of the helper comes with its slirp4netns running: its API socket is linked as
    // the box's (`publish`, other processes' teardown) and nothing is started here.
    const spare = answer.slirpPid !== undefined && answer.apiSocket !== undefined;
    if (spare) {
      rmSync(this.file(id, 'sock'), { force: true });
      symlinkSync(answer.apiSocket!, this.file(id, 'sock'));
    }
    const [slirp, linked, firewall] = await Promise.allSettled([
      spare
        ? Promise.resolve(answer.slirpPid!)
        : startSlirp({
            netns: join(NETNS_DIR, gateway),
            cidr: SLIRP_CIDR,
            apiSocket: this.file(id, 'sock'),
            logFile: this.file(id, 'log'),
            // The host loopback is needed for the resolver and the proxy (the gateway admits only them).
            disableHostLoopback: false,
            disableDns: true,
            exitWithParent: !config.detach,
          }),
      link !== undefined ? linkBox(gateway, link) : Promise.resolve(),
      callHelper(this.#helper, { op: 'ready', id }),
    ]);
    persisted.slirpPid = slirp.status === 'fulfilled' ? slirp.value : 0;
    writeFileSync(this.file(id, 'json'), JSON.stringify(persisted));
    if (slirp.status === 'rejected') throw slirp.reason;
    if (linked.status === 'rejected') throw linked.reason;
    if (firewall.status === 'rejected') throw firewall.reason;
    return { live, persisted };
  }

  /**
   * `/etc/resolv.conf` (and the CA in the trust store when secrets are used) in the box's root, written
   * confined to it (engine/confined.ts): an image whose `etc`, `etc/ssl` or bundle is a symlink to a host
   * path gets the files inside its own root, never on the host.
   */
  #writeEtc(boxDir: string, caPem: string | undefined): void {
    const root = join(boxDir, 'rootfs');
    writeFileInRoot(root, '/etc/resolv.conf', `nameserver ${SLIRP_DNS_IP}\noptions attempts:1 timeout:2\n`);
    if (caPem === undefined) return;
    writeFileInRoot(root, BOX_CA_PATH, caPem);
    let wroteDefault = false;
    for (const bundle of BUNDLE_PATHS) {
      const existing = readFileInRoot(root, bundle);
      if (existing === undefined) continue;
      // A bundle that is a symlink (into the read-only image) is replaced, never followed.
      writeFileInRoot(root, bundle, `${existing.toString('utf8').trimEnd()}\n${caPem}`);
      if (bundle === BUNDLE_PATHS[0]) wroteDefault = true;
    }
    if (!wroteDefault) writeFileInRoot(root, BUNDLE_PATHS[0]!, caPem);
  }

  /**
   * Replaces the `allowNet` of running box `id` (network `enabled`) in its network helper: atomically
   * for the box (one nft transaction), connections to destinations no longer allowed are cut, and the
   * new policy is what the helper keeps across its restarts.
   * @returns the policy now in force.
   * @throws BoxError `invalid_option` naming `network.allowNet[i]`; `not_found` when the helper has no
   *   policy for the box (not running, or its network is disabled); `unavailable` when no helper answers.
   */
  async update(id: string, allowNet: readonly string[]): Promise<string[]> {
    parseAllowNet(allowNet);
    const answer = await callHelper(this.#helper, { op: 'update', id, allowNet: [...allowNet] });
    return answer.allowNet ?? [...allowNet];
  }

  /** Tears the box's network down (slirp4netns, gateway namespace, resolver, proxy, state files). Idempotent. */
  async teardown(id: string): Promise<void> {
    // A host side still being set up by `prepare` finishes first, so that what it started is found.
    const early = this.#early.get(id);
    this.#early.delete(id);
    await early?.host.catch(() => {});
    this.forget(id);
    // The helper's state file goes first (a helper that does not answer drops the box when it sees
    // the file gone), then the helper is told, when it runs.
    rmSync(join(this.#helper, 'boxes', `${id}.json`), { force: true });
    await callHelper(this.#helper, { op: 'remove', id }, { start: false, timeoutMs: 5000 }).catch(() => {});
    try {
      const persisted = JSON.parse(readFileSync(this.file(id, 'json'), 'utf8')) as Persisted;
      if (persisted.slirpPid > 0 && alive(persisted.slirpPid, 'slirp4netns'))
        process.kill(persisted.slirpPid, 'SIGKILL');
    } catch {}
    await removeGatewayNamespace(gatewayName(id));
    for (const ext of ['json', 'sock', 'log']) rmSync(this.file(id, ext), { force: true });
  }
}
