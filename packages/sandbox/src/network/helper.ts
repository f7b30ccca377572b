/**
 * The network helper: one long-lived process per runtime home (per network state directory) that owns
 * the host side of every box's network policy — the DNS resolver that enforces `allowNet`, the
 * `hosts` set it fills in the box's gateway, and the secrets proxy with the box's CA — so that a box
 * keeps exactly its policy whoever created it and whether that process still runs.
 *
 * - Control: newline-delimited JSON over the Unix socket `<dir>/sock` (mode 0600 in a 0700 directory
 *   owned by root), one request and one answer per connection (`HelperRequest`, `HelperAnswer`); a
 *   request line is at most {@link MAX_REQUEST_BYTES}.
 * - State: `<dir>/boxes/<id>.json` per box (`BoxPolicyState`: `allowNet`, secrets with their values,
 *   the CA keys, the resolver and proxy ports, the addresses admitted per name), mode 0600, written
 *   atomically (a temporary file renamed over it). `<dir>` is under `/run` (see `helperDir`).
 * - Gateways: a `register` with `gateway: true` takes a spare gateway (`spares.ts`: namespace,
 *   slirp4netns, resolver and open ruleset made ahead, forwarding off; {@link SparePool} refills the
 *   pool after a take) and links `/run/netns/sbx-<id>` to it, answering with its slirp4netns pid and
 *   API socket; with no spare ready it makes the box's gateway namespace (`gateway.ts`) beside its
 *   resolver and proxy. It answers, and then puts the box's ruleset in force (forwarding on after it);
 *   `ready` answers once that is done (or with its error), and every later request on the box waits
 *   for it. The process creating the box spawns nothing for its host side (slirp4netns only when no
 *   spare was ready).
 * - Spares taken: the helper watches `/run/netns` (and looks again every {@link SWEEP_MS}); when a
 *   box's gateway name goes (teardown, or its supervisor after its creator died) or leads elsewhere,
 *   the spare's slirp4netns (checked by `pid:starttime`), namespace file and files are ended. A
 *   starting helper ends the untaken spares of the one before it (`SparePool.sweep`); a helper that
 *   stops (idle exit) ends its own.
 * - Restart: a helper that starts (after a crash or a kill; `helper-client.ts` runs it in a restart
 *   loop) reads every state file, binds the resolver and the proxy on the recorded ports (other ports
 *   when those are taken) and loads the box's gateway ruleset again from the state, admitted addresses
 *   included. While no helper runs the box's DNS and proxy ports answer nothing: names do not resolve
 *   and the proxy refuses connections (fail closed); addresses already admitted stay admitted.
 * - Updates (`update`): the new `allowNet` is written to the state first, then the ruleset is replaced
 *   in one nft transaction (addresses admitted for names the new policy still allows are kept), then
 *   the resolver and the proxy follow it; the proxy closes its connections to destinations the new
 *   policy refuses and the ruleset refuses every further packet of the box's other connections to them.
 * - Lifetime: a box's entry goes when its state file is removed (`remove`, or teardown from any
 *   process) or its gateway namespace is gone for {@link ORPHAN_GRACE_MS}; the helper exits (code 0)
 *   once it has had no box for {@link IDLE_EXIT_MS}.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, watch } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { BoxError, type BoxErrorCode, codeOf } from '../errors.ts';
import { type DnsServer, startDnsServer } from './dns.ts';
import {
  admitHosts,
  bindGatewayNamespace,
  createGatewayNamespace,
  gatewayName,
  gatewayRules,
  gatewayTarget,
  loadGatewayRules,
  NETNS_DIR,
} from './gateway.ts';
import { type AllowPolicy, allowsName, parseAllowNet } from './policy.ts';
import { type ProxyCaMaterial, type SecretsProxy, startSecretsProxy } from './secrets.ts';
import {
  closeGate,
  openGate,
  releaseSpare,
  rulesetCurrent,
  type Spare,
  SparePool,
  type SpareRecord,
} from './spares.ts';
import { writeFileAtomic } from './state-file.ts';

/** Largest request line the helper reads, bytes (secrets included). */
export const MAX_REQUEST_BYTES = 1024 * 1024;
/** How long a box's entry outlives its missing gateway namespace, ms (the box may still be starting). */
export const ORPHAN_GRACE_MS = 30_000;
/**
 * How long the helper runs without any box before it exits (ending its spare gateways), ms. A box
 * created after the helper exited waits for a new one to start (≈ 0.4–0.6 s here), so it stays for a
 * minute: boxes made now and then, e.g. by a server, find it and its spares ready.
 */
export const IDLE_EXIT_MS = 60_000;
/** How long a refused request's connection may go on sending before it is closed, ms. */
const IDLE_SOCKET_MS = 5_000;
/** How often the helper looks for boxes that are gone, ms. */
export const SWEEP_MS = 2_000;
/** Addresses recorded per admitted name (the gateway keeps every one it was given). */
const MAX_ADDRESSES_PER_NAME = 64;
/** Names recorded per box (a `*.` rule admits any number): past it the oldest record goes. */
const MAX_ADMITTED_NAMES = 1024;

/** A secret rule with its value, as the proxy needs it. */
export interface HelperSecret {
  name: string;
  value: string;
  hosts: string[];
  placeholder: string;
}

/** A request to the helper. */
export type HelperRequest =
  | { op: 'register'; id: string; allowNet: string[]; secrets: HelperSecret[]; gateway?: boolean }
  | { op: 'ready'; id: string }
  | { op: 'update'; id: string; allowNet: string[] }
  | { op: 'remove'; id: string }
  | { op: 'ping' };

/**
 * The helper's answer: `ok` with the op's result, or a `BoxError` code and message. A `register` served
 * from a spare gateway (`spares.ts`) carries its slirp4netns's pid and API socket path.
 */
export type HelperAnswer =
  | {
      ok: true;
      dnsPort?: number;
      proxyPort?: number;
      caPem?: string;
      allowNet?: string[];
      slirpPid?: number;
      apiSocket?: string;
    }
  | { ok: false; code: BoxErrorCode; message: string; field?: string };

/** What the helper keeps on disk for one box (`<dir>/boxes/<id>.json`, mode 0600). */
export interface BoxPolicyState {
  id: string;
  allowNet: string[];
  secrets: HelperSecret[];
  /** UDP port of the box's resolver on 127.0.0.1. */
  dnsPort: number;
  /** TCP port of the secrets proxy on 127.0.0.1 (boxes with secrets). */
  proxyPort?: number;
  /** The box CA (boxes with secrets); its certificate is in the box's trust store. */
  ca?: ProxyCaMaterial;
  /** Addresses the resolver admitted, per name (lower case). */
  admitted: Record<string, string[]>;
  /** When the box was registered, epoch ms. */
  registeredAt: number;
  /**
   * The spare gateway the box took (`/run/netns/sbx-<id>` links to it): ended by the helper when that
   * link goes or leads elsewhere.
   */
  spare?: SpareRecord;
}

interface Entry {
  state: BoxPolicyState;
  policy: AllowPolicy;
  dns: DnsServer;
  proxy?: SecretsProxy;
  /** The load of the box's ruleset that `register` or a restart began (what `ready` reports). */
  rules?: Promise<void>;
  /** Operations on this box, one after the other. */
  chain: Promise<unknown>;
}

const BOX_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** The addresses admitted for names `policy` allows (deduplicated). */
function keptHosts(state: BoxPolicyState, policy: AllowPolicy): string[] {
  const kept = new Set<string>();
  for (const [name, addresses] of Object.entries(state.admitted)) {
    if (allowsName(policy, name)) for (const a of addresses) kept.add(a);
  }
  return [...kept];
}

/** A `BoxError` from a request field that is missing or of the wrong type. */
function badRequest(field: string, rule: string): BoxError {
  return new BoxError(`invalid network helper request ${field}: ${rule}`, { field });
}

function parseRequest(line: string): HelperRequest {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw badRequest('body', 'must be JSON');
  }
  const r = value as Record<string, unknown>;
  if (r === null || typeof r !== 'object') throw badRequest('body', 'must be an object');
  if (r.op === 'ping') return { op: 'ping' };
  if (typeof r.id !== 'string' || !BOX_ID_RE.test(r.id)) throw badRequest('id', 'must be a box id');
  const strings = (v: unknown, field: string) => {
    if (!Array.isArray(v) || !v.every((s) => typeof s === 'string'))
      throw badRequest(field, 'must be an array of strings');
    return v as string[];
  };
  if (r.op === 'remove') return { op: 'remove', id: r.id };
  if (r.op === 'ready') return { op: 'ready', id: r.id };
  if (r.op === 'update') return { op: 'update', id: r.id, allowNet: strings(r.allowNet, 'allowNet') };
  if (r.op === 'register') {
    if (!Array.isArray(r.secrets)) throw badRequest('secrets', 'must be an array');
    const secrets = r.secrets.map((s: Record<string, unknown>, i) => {
      if (
        typeof s?.name !== 'string' ||
        typeof s.value !== 'string' ||
        typeof s.placeholder !== 'string' ||
        s.placeholder === ''
      )
        throw badRequest(`secrets[${i}]`, 'must have string name, value and placeholder');
      return {
        name: s.name,
        value: s.value,
        placeholder: s.placeholder,
        hosts: strings(s.hosts, `secrets[${i}].hosts`),
      };
    });
    const allowNet = strings(r.allowNet, 'allowNet');
    if (r.gateway !== undefined && typeof r.gateway !== 'boolean')
      throw badRequest('gateway', 'must be a boolean');
    return { op: 'register', id: r.id, allowNet, secrets, ...(r.gateway === true ? { gateway: true } : {}) };
  }
  throw badRequest('op', 'must be register, ready, update, remove or ping');
}

/** The helper of one state directory; `start` serves until `stopped` resolves (idle exit). */
export class NetworkHelper {
  readonly #dir: string;
  readonly #boxes = new Map<string, Entry>();
  readonly #log: (line: string) => void;
  readonly #spareCount: number | undefined;
  #spares: SparePool | null = null;
  #server: Server | null = null;
  #watcher: ReturnType<typeof watch> | null = null;
  #checking = false;
  #checkAgain = false;
  #idleSince = Date.now();
  #timer: NodeJS.Timeout | null = null;
  #done!: () => void;
  /** Resolves when the helper has stopped serving (no box for `IDLE_EXIT_MS`). */
  readonly stopped = new Promise<void>((resolve) => {
    this.#done = resolve;
  });

  /**
   * `dir`: the helper's directory (`helperDir`); `log` gets one line per notable event (no secrets);
   * `options.spares`: spare gateways kept ready (default `SPARE_COUNT`, 0: none).
   */
  constructor(dir: string, log: (line: string) => void, options: { spares?: number } = {}) {
    this.#dir = dir;
    this.#log = log;
    this.#spareCount = options.spares;
  }

  #stateFile(id: string): string {
    return join(this.#dir, 'boxes', `${id}.json`);
  }

  /**
   * Restores every box of the state directory, ends the spare gateways a former helper left untaken,
   * then listens on `<dir>/sock`, watches `/run/netns` (a box's gateway name that goes ends the spare
   * it took) and makes spares.
   * @throws Error when the socket cannot be bound.
   */
  async start(): Promise<void> {
    mkdirSync(join(this.#dir, 'boxes'), { recursive: true, mode: 0o700 });
    const spares = new SparePool(this.#dir, this.#log, this.#spareCount);
    for (const name of readdirSync(join(this.#dir, 'boxes'))) {
      if (!name.endsWith('.json')) continue;
      const id = name.slice(0, -'.json'.length);
      try {
        const state = JSON.parse(readFileSync(this.#stateFile(id), 'utf8')) as BoxPolicyState;
        await this.#restore(state);
      } catch (error) {
        this.#log(`restore ${id} failed: ${(error as Error).message}`);
      }
    }
    const taken = new Set<string>();
    for (const entry of this.#boxes.values()) if (entry.state.spare) taken.add(entry.state.spare.name);
    await spares.sweep(taken);
    this.#spares = spares;
    await this.#checkSpares();
    const sock = join(this.#dir, 'sock');
    rmSync(sock, { force: true });
    const server = createServer((socket) => this.#serve(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(sock, () => resolve());
    });
    this.#server = server;
    this.#timer = setInterval(() => this.#sweep(), SWEEP_MS);
    mkdirSync(NETNS_DIR, { recursive: true });
    try {
      this.#watcher = watch(NETNS_DIR, () => void this.#checkSpares());
      this.#watcher.on('error', () => {});
    } catch (error) {
      // The sweep (every SWEEP_MS) still finds gateway names that went.
      this.#log(`cannot watch ${NETNS_DIR}: ${(error as Error).message}`);
    }
    spares.schedule();
  }

  /**
   * Ends the spare gateway of every box whose gateway name (`/run/netns/sbx-<id>`) is gone or leads
   * elsewhere (its teardown, or its supervisor after its creator died): slirp4netns (checked by
   * `pid:starttime`), the namespace file and the spare's files. One run at a time; a run asked for
   * meanwhile runs after it.
   */
  async #checkSpares(): Promise<void> {
    if (this.#checking) {
      this.#checkAgain = true;
      return;
    }
    this.#checking = true;
    try {
      do {
        this.#checkAgain = false;
        for (const [id, entry] of this.#boxes) {
          const spare = entry.state.spare;
          if (!spare || gatewayTarget(gatewayName(id)) === spare.name) continue;
          delete entry.state.spare;
          if (this.#boxes.get(id) === entry && existsSync(this.#stateFile(id))) this.#persist(entry);
          await releaseSpare(this.#dir, spare);
          this.#log(`spare ${spare.name} of ${id} ended (gateway name gone)`);
        }
      } while (this.#checkAgain);
    } finally {
      this.#checking = false;
    }
  }

  /** Starts resolver and proxy of a stored box again (recorded ports when free) and reloads its ruleset. */
  async #restore(state: BoxPolicyState): Promise<void> {
    if (!existsSync(join(NETNS_DIR, gatewayName(state.id)))) {
      if (Date.now() - state.registeredAt > ORPHAN_GRACE_MS) {
        rmSync(this.#stateFile(state.id), { force: true });
        return;
      }
    }
    const entry = await this.#open(state, true);
    this.#boxes.set(state.id, entry);
    this.#persist(entry);
    entry.rules = this.#loadRules(entry);
    await entry.rules.catch((error) => this.#log(`rules ${state.id}: ${(error as Error).message}`));
    this.#log(`restored ${state.id} (dns ${entry.state.dnsPort}, proxy ${entry.state.proxyPort ?? '-'})`);
  }

  /**
   * Binds resolver (and proxy) of `state`; `reuse`: try the recorded ports first; `spare`: the
   * resolver is the spare gateway's (its policy becomes the box's before this resolves).
   */
  async #open(state: BoxPolicyState, reuse: boolean, spare?: Spare): Promise<Entry> {
    const policy = parseAllowNet(state.allowNet);
    const entry = { state, policy } as Entry;
    const bind = async (addresses: string[], name: string) => {
      if (entry.policy.open) return;
      const known = new Set(Object.values(entry.state.admitted).flat());
      const fresh = addresses.filter((a) => !known.has(a));
      const list = entry.state.admitted[name] ?? [];
      const merged = [...new Set([...addresses, ...list])].slice(0, MAX_ADDRESSES_PER_NAME);
      const changed = merged.length !== list.length || merged.some((a, i) => a !== list[i]);
      if (fresh.length > 0) await admitHosts(gatewayName(entry.state.id), fresh);
      if (changed) {
        entry.state.admitted[name] = merged;
        const names = Object.keys(entry.state.admitted);
        for (const old of names.slice(0, Math.max(0, names.length - MAX_ADMITTED_NAMES))) {
          delete entry.state.admitted[old];
        }
        this.#persist(entry);
      }
    };
    const dnsOptions = { policy, bind };
    if (spare) {
      entry.dns = spare.dns;
      entry.dns.setPolicy(policy);
      spare.bindTo.bind = bind;
    } else {
      entry.dns = await startDnsServer({ ...dnsOptions, ...(reuse ? { port: state.dnsPort } : {}) }).catch(
        () => startDnsServer(dnsOptions),
      );
    }
    state.dnsPort = entry.dns.port;
    if (state.secrets.length > 0) {
      const proxyOptions = {
        policy,
        secrets: state.secrets,
        label: state.id,
        ...(state.ca ? { ca: state.ca } : {}),
      };
      entry.proxy = await startSecretsProxy({
        ...proxyOptions,
        ...(reuse && state.proxyPort ? { port: state.proxyPort } : {}),
      }).catch(() => startSecretsProxy(proxyOptions));
      state.proxyPort = entry.proxy.port;
      state.ca = entry.proxy.ca;
    }
    entry.chain = Promise.resolve();
    return entry;
  }

  #persist(entry: Entry): void {
    writeFileAtomic(this.#stateFile(entry.state.id), JSON.stringify(entry.state));
  }

  /**
   * Loads the box's gateway ruleset from its state (policy, ports, admitted addresses); `fresh`: into
   * the gateway namespace this helper just made (no ruleset to replace).
   */
  async #loadRules(entry: Entry, fresh = false): Promise<void> {
    const { state, policy } = entry;
    await loadGatewayRules(
      gatewayName(state.id),
      gatewayRules({
        policy,
        dnsPort: state.dnsPort,
        ...(state.proxyPort !== undefined ? { proxyPort: state.proxyPort } : {}),
        hosts: keptHosts(state, policy),
      }),
      { fresh },
    );
  }

  /**
   * Closes box `id`'s resolver and proxy; `release`: the box is going, so the spare gateway it took
   * ends too (with its `/run/netns/sbx-<id>` link).
   */
  async #close(id: string, release = false): Promise<void> {
    const entry = this.#boxes.get(id);
    if (!entry) return;
    this.#boxes.delete(id);
    await entry.dns.close().catch(() => {});
    await entry.proxy?.close().catch(() => {});
    const spare = entry.state.spare;
    if (release && spare) {
      if (gatewayTarget(gatewayName(id)) === spare.name)
        rmSync(join(NETNS_DIR, gatewayName(id)), { force: true });
      await releaseSpare(this.#dir, spare);
    }
    if (this.#boxes.size === 0) this.#idleSince = Date.now();
  }

  /** Drops boxes whose state file or gateway namespace is gone; stops after `IDLE_EXIT_MS` without boxes. */
  #sweep(): void {
    void this.#checkSpares();
    for (const [id, entry] of this.#boxes) {
      const gone = !existsSync(this.#stateFile(id));
      const orphan =
        !existsSync(join(NETNS_DIR, gatewayName(id))) &&
        Date.now() - entry.state.registeredAt > ORPHAN_GRACE_MS;
      if (gone || orphan) {
        entry.chain = entry.chain.then(async () => {
          await this.#close(id, true);
          rmSync(this.#stateFile(id), { force: true });
          this.#log(`dropped ${id} (${gone ? 'removed' : 'gateway gone'})`);
        });
      }
    }
    if (this.#boxes.size === 0 && Date.now() - this.#idleSince >= IDLE_EXIT_MS) {
      // A registration that raced with the decision finds no socket and starts a new helper.
      const stored = readdirSync(join(this.#dir, 'boxes')).some((n) => n.endsWith('.json'));
      if (stored) return;
      this.stop();
    }
  }

  /**
   * Stops serving: closes the socket, every resolver and proxy (state files and the spare gateways
   * boxes took stay), ends the spare gateways no box took; `stopped` resolves once they are gone.
   */
  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#watcher?.close();
    this.#server?.close();
    rmSync(join(this.#dir, 'sock'), { force: true });
    for (const id of [...this.#boxes.keys()]) void this.#close(id);
    void (this.#spares?.close() ?? Promise.resolve()).finally(() => this.#done());
  }

  #serve(socket: Socket): void {
    socket.on('error', () => {});
    let buffered = '';
    let size = 0;
    socket.setEncoding('utf8');
    const read = (chunk: string) => {
      buffered += chunk;
      size += Buffer.byteLength(chunk);
      if (size > MAX_REQUEST_BYTES) {
        // The rest is read and dropped (never kept) until the peer closes, at most IDLE_SOCKET_MS more.
        socket.off('data', read);
        buffered = '';
        socket.resume();
        socket.setTimeout(IDLE_SOCKET_MS, () => socket.destroy());
        const answer = {
          ok: false,
          code: 'invalid_option',
          field: 'body',
          message: `request over ${MAX_REQUEST_BYTES} bytes`,
        };
        socket.end(`${JSON.stringify(answer)}\n`);
        return;
      }
      const nl = buffered.indexOf('\n');
      if (nl < 0) return;
      socket.off('data', read);
      socket.pause();
      this.#handle(buffered.slice(0, nl)).then((answer) => socket.end(`${JSON.stringify(answer)}\n`));
    };
    socket.on('data', read);
  }

  async #handle(line: string): Promise<HelperAnswer> {
    try {
      const request = parseRequest(line);
      if (request.op === 'ping') return { ok: true };
      const prior = this.#boxes.get(request.id)?.chain ?? Promise.resolve();
      const run = prior.catch(() => {}).then(() => this.#apply(request));
      const entry = this.#boxes.get(request.id);
      if (entry) entry.chain = run.catch(() => {});
      return await run;
    } catch (error) {
      const e = error as BoxError;
      return {
        ok: false,
        code: codeOf(error),
        message: e.message,
        ...(typeof e.field === 'string' ? { field: e.field } : {}),
      };
    }
  }

  /**
   * Registers box `state.id` on a spare gateway (`spares.ts`): the box's resolver is the spare's (with
   * the box's policy), its proxy is started, `/run/netns/sbx-<id>` becomes a link to the spare, and the
   * answer carries the spare's slirp4netns pid and API socket. The ruleset then goes in force after the
   * answer, as on a gateway made at registration (`ready` reports it): for the open policy without
   * secrets, the host's addresses unchanged since the spare was made, the spare's loaded ruleset is
   * the box's and its gate turns forwarding on; otherwise the
   * gate exits with forwarding off and the box's ruleset replaces the loaded one, forwarding going on
   * once it is in force. The spare forwards nothing before either.
   * @throws Error when the proxy or the link cannot be made (the spare is ended).
   */
  async #registerOnSpare(state: BoxPolicyState, spare: Spare): Promise<HelperAnswer> {
    const { id } = state;
    let entry: Entry | undefined;
    try {
      entry = await this.#open(state, false, spare);
      await bindGatewayNamespace(gatewayName(id), spare.name);
    } catch (error) {
      spare.gate.kill('SIGKILL');
      await (entry?.dns ?? spare.dns).close().catch(() => {});
      await entry?.proxy?.close().catch(() => {});
      await releaseSpare(this.#dir, spare);
      throw error;
    }
    state.spare = { name: spare.name, slirp: spare.slirp };
    this.#boxes.set(id, entry);
    this.#persist(entry);
    this.#spares?.forget(spare);
    const loaded = entry.policy.open && !entry.proxy && rulesetCurrent(spare);
    const ready = entry;
    entry.rules = loaded ? openGate(spare) : closeGate(spare).then(() => this.#loadRules(ready));
    entry.chain = entry.rules.catch(() => {});
    this.#log(`registered ${id} on spare ${spare.name}`);
    return {
      ok: true,
      dnsPort: state.dnsPort,
      ...(entry.proxy ? { proxyPort: entry.proxy.port, caPem: entry.proxy.caPem } : {}),
      slirpPid: spare.slirpPid,
      apiSocket: spare.apiSocket,
    };
  }

  async #apply(request: Exclude<HelperRequest, { op: 'ping' }>): Promise<HelperAnswer> {
    const { id } = request;
    if (request.op === 'remove') {
      await this.#close(id, true);
      rmSync(this.#stateFile(id), { force: true });
      return { ok: true };
    }
    if (request.op === 'register') {
      await this.#close(id, true);
      const state: BoxPolicyState = {
        id,
        allowNet: request.allowNet,
        secrets: request.secrets,
        dnsPort: 0,
        admitted: {},
        registeredAt: Date.now(),
      };
      parseAllowNet(state.allowNet);
      const spare = request.gateway ? (this.#spares?.take() ?? null) : null;
      if (spare) return await this.#registerOnSpare(state, spare);
      // The gateway namespace (when asked for) and the resolver and proxy at once: the spawns of the
      // host side run in this process, not in the one creating the box.
      const [opened, made] = await Promise.allSettled([
        this.#open(state, false),
        request.gateway ? createGatewayNamespace(gatewayName(id)) : Promise.resolve(''),
      ]);
      if (opened.status === 'rejected') throw opened.reason;
      const entry = opened.value;
      if (made.status === 'rejected') {
        await entry.dns.close().catch(() => {});
        await entry.proxy?.close().catch(() => {});
        throw made.reason;
      }
      this.#boxes.set(id, entry);
      this.#persist(entry);
      if (request.gateway) {
        // The ruleset loads after the answer (the caller starts slirp4netns meanwhile); `ready`
        // reports it, and every later operation on the box waits for it.
        entry.rules = this.#loadRules(entry, true);
        entry.chain = entry.rules.catch(() => {});
      }
      this.#log(`registered ${id}`);
      return {
        ok: true,
        dnsPort: state.dnsPort,
        ...(entry.proxy ? { proxyPort: entry.proxy.port, caPem: entry.proxy.caPem } : {}),
      };
    }
    const entry = this.#boxes.get(id);
    if (!entry) throw new BoxError(`box ${id} has no network policy on this host`, { code: 'not_found' });
    if (request.op === 'ready') {
      await entry.rules;
      return { ok: true };
    }
    const policy = parseAllowNet(request.allowNet);
    const before = { allowNet: entry.state.allowNet, policy: entry.policy };
    entry.state.allowNet = [...request.allowNet];
    entry.policy = policy;
    this.#persist(entry);
    try {
      await this.#loadRules(entry);
    } catch (error) {
      entry.state.allowNet = before.allowNet;
      entry.policy = before.policy;
      this.#persist(entry);
      throw new BoxError(
        `box ${id}: the new network policy could not be loaded: ${(error as Error).message}`,
        {
          code: 'internal',
          cause: error,
        },
      );
    }
    // Names the new policy refuses lose their admitted addresses.
    for (const name of Object.keys(entry.state.admitted)) {
      if (!allowsName(policy, name)) delete entry.state.admitted[name];
    }
    this.#persist(entry);
    entry.dns.setPolicy(policy);
    await entry.proxy?.setPolicy(policy);
    this.#log(`updated ${id}`);
    return { ok: true, allowNet: entry.state.allowNet };
  }
}
