/**
 * Spare gateways of the network helper (`helper.ts`): host sides of a box network made ahead of need,
 * so that a box registering with `gateway: true` gets one without any program being started for it.
 *
 * A spare is a gateway namespace `/run/netns/sbx-sp<helper dir name><8 hex>` (`createGatewayNamespace`)
 * with slirp4netns running in it (its API socket and log in `<helper dir>/spares/`), a resolver on the
 * host (`dns.ts`, open policy until a box takes it) and the open-policy ruleset for that resolver
 * loaded; IPv6 is off and IPv4 forwarding stays OFF: the spare forwards nothing. A shell left inside
 * the namespace (the "gate") waits on its stdin: `openGate` turns forwarding on (a box with the open
 * policy and no secrets, whose ruleset is the loaded one, when the host's addresses are still those it
 * refuses: `rulesetCurrent`), `closeGate` lets it exit without (the helper then loads the box's own
 * ruleset, which turns forwarding on once it is in force).
 *
 * Everything a spare runs is started at niceness {@link SPARE_NICE} (the boxes being started meanwhile
 * come first); slirp4netns and the gate go back to niceness 0 when a box takes the spare. slirp4netns
 * runs in a session of its own and outlives the helper (a box keeps its network while the helper
 * restarts); the record `<helper dir>/spares/<name>.json` (`SpareRecord`, its `pid:starttime`) lets the
 * next helper end the spares nobody took (`sweep`). A spare a box took is recorded in the box's state
 * instead, and `releaseSpare` ends it when the box's gateway name goes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { setPriority } from 'node:os';
import { basename, join } from 'node:path';
import { ownerAlive, processIdentity } from '../engine/proc-stat.ts';
import { hostIpv4Addresses, SLIRP_CIDR } from './destinations.ts';
import { type DnsServer, type DnsServerOptions, startDnsServer } from './dns.ts';
import { createGatewayNamespace, gatewayRules, NETNS_DIR, removeGatewayNamespace } from './gateway.ts';
import { startSlirp } from './netns.ts';
import { parseAllowNet } from './policy.ts';
import { writeFileAtomic } from './state-file.ts';

/** Spares the helper keeps ready. */
export const SPARE_COUNT = 2;
/** How long after a spare was taken (or the helper started) the pool is refilled, ms. */
export const REFILL_DELAY_MS = 150;
/** Niceness of everything a spare runs until a box takes it. */
export const SPARE_NICE = 19;

/** How a spare is found again by a later helper: its namespace name and slirp4netns's `pid:starttime`. */
export interface SpareRecord {
  /** File name of the gateway namespace in `/run/netns`. */
  name: string;
  /** `pid:starttime` of its slirp4netns; empty while it starts. */
  slirp: string;
}

/** A spare ready to be taken. */
export interface Spare extends SpareRecord {
  /** Pid of its slirp4netns. */
  slirpPid: number;
  /** slirp4netns's API socket (host port forwards). */
  apiSocket: string;
  /** The resolver (open policy until taken; the ruleset sends the namespace's DNS to its port). */
  dns: DnsServer;
  /** Where the resolver hands the addresses it admits: set by the helper when a box takes the spare. */
  bindTo: { bind?: DnsServerOptions['bind'] };
  /** The gate shell inside the namespace, waiting for `go` on its stdin. */
  gate: ChildProcess;
  /** Resolves with the gate's exit code (null: killed). */
  gateExit: Promise<number | null>;
  /** The host's IPv4 addresses its ruleset refuses (`hostIpv4Addresses` when it was made), sorted. */
  hostAddresses: string[];
}

/**
 * Whether taken spare `spare`'s loaded ruleset is exactly the one a box with the open policy and no
 * secrets would get now: made for the host addresses the host has now (one added since would be a
 * destination it lets through).
 */
export function rulesetCurrent(spare: Spare): boolean {
  const now = hostIpv4Addresses().sort();
  return now.length === spare.hostAddresses.length && now.every((a, i) => a === spare.hostAddresses[i]);
}

/**
 * The gate: IPv6 off, the ruleset (`$RULES`) loaded, `loaded` on stdout; then IPv4 forwarding on only
 * when `go` arrives on stdin (exit 0), else exit 1 with forwarding off.
 */
const GATE_SH = [
  'set -e',
  'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6',
  'printf "%s" "$RULES" | nft -f -',
  'echo loaded',
  'read -r go || exit 1',
  '[ "$go" = go ] || exit 1',
  'echo 1 > /proc/sys/net/ipv4/ip_forward',
].join('\n');

/** The spare file `<dir>/spares/<name>.<ext>` (`json`, `sock`, `log`). */
function spareFile(dir: string, name: string, ext: string): string {
  return join(dir, 'spares', `${name}.${ext}`);
}

/** Puts process `pid` at niceness `nice`; a process gone meanwhile is fine. */
function renice(pid: number | undefined, nice: number): void {
  if (pid === undefined) return;
  try {
    setPriority(pid, nice);
  } catch {}
}

/**
 * Ends spare `record` of helper directory `dir`: SIGKILLs its slirp4netns when that process still
 * runs (same `pid:starttime`), unmounts and deletes its namespace file and deletes its files in
 * `<dir>/spares`. Idempotent.
 */
export async function releaseSpare(dir: string, record: SpareRecord): Promise<void> {
  if (record.slirp !== '' && ownerAlive(record.slirp)) {
    try {
      process.kill(Number(record.slirp.split(':')[0]), 'SIGKILL');
    } catch {}
  }
  await removeGatewayNamespace(record.name);
  for (const ext of ['json', 'sock', 'log']) rmSync(spareFile(dir, record.name, ext), { force: true });
}

/** Opens the gate of taken spare `spare`: IPv4 forwarding goes on. @throws Error when the gate is gone. */
export async function openGate(spare: Spare): Promise<void> {
  renice(spare.gate.pid, 0);
  spare.gate.stdin?.end('go\n');
  const code = await spare.gateExit;
  if (code !== 0) throw new Error(`gateway ${spare.name}: forwarding could not be turned on (${code})`);
}

/** Lets the gate of taken spare `spare` exit with forwarding still off. */
export async function closeGate(spare: Spare): Promise<void> {
  spare.gate.stdin?.end('no\n');
  await spare.gateExit;
}

/** The spares of one helper directory. */
export class SparePool {
  readonly #dir: string;
  readonly #prefix: string;
  readonly #log: (line: string) => void;
  readonly #count: number;
  readonly #ready: Spare[] = [];
  #making = 0;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;

  /** `dir`: the helper's directory; `count`: spares to keep ready (default {@link SPARE_COUNT}). */
  constructor(dir: string, log: (line: string) => void, count = SPARE_COUNT) {
    this.#dir = dir;
    this.#prefix = `sbx-sp${basename(dir)}`;
    this.#log = log;
    this.#count = count;
    mkdirSync(join(dir, 'spares'), { recursive: true, mode: 0o700 });
  }

  /** Whether `name` (a file of `/run/netns`) is a spare of this helper directory. */
  owns(name: string): boolean {
    return name.startsWith(this.#prefix) && /^[0-9a-f]{8}$/.test(name.slice(this.#prefix.length));
  }

  /** Spares ready now. */
  get size(): number {
    return this.#ready.length;
  }

  /**
   * Ends every spare of this directory not in `inUse` (names of spares boxes took): those recorded in
   * `<dir>/spares` and any namespace file of this directory's spares in `/run/netns`. Run by a
   * starting helper, before it makes spares of its own.
   */
  async sweep(inUse: Set<string>): Promise<void> {
    const records = new Map<string, SpareRecord>();
    for (const file of readdirSync(join(this.#dir, 'spares'))) {
      const name = file.slice(0, file.lastIndexOf('.'));
      if (!this.owns(name) || inUse.has(name)) continue;
      let slirp = '';
      try {
        if (file.endsWith('.json'))
          slirp = String(
            (JSON.parse(readFileSync(join(this.#dir, 'spares', file), 'utf8')) as SpareRecord).slirp,
          );
      } catch {}
      if (!records.has(name) || slirp !== '') records.set(name, { name, slirp });
    }
    let names: string[] = [];
    try {
      names = readdirSync(NETNS_DIR);
    } catch {}
    for (const name of names) {
      if (this.owns(name) && !inUse.has(name) && !records.has(name)) records.set(name, { name, slirp: '' });
    }
    for (const record of records.values()) {
      await releaseSpare(this.#dir, record);
      this.#log(`spare ${record.name} swept`);
    }
  }

  /**
   * Takes a ready spare (its slirp4netns and gate still run) and puts its processes back at
   * niceness 0; null when none is ready. Its record leaves `<dir>/spares`: the caller records it in
   * the box's state (`SpareRecord`) first. Schedules a refill.
   */
  take(): Spare | null {
    for (;;) {
      const spare = this.#ready.shift();
      if (!spare) break;
      if (processIdentity(spare.slirpPid) !== spare.slirp || spare.gate.exitCode !== null) {
        this.#log(`spare ${spare.name} lost its slirp4netns or gate`);
        void this.#destroy(spare);
        continue;
      }
      renice(spare.slirpPid, 0);
      this.schedule();
      return spare;
    }
    this.schedule();
    return null;
  }

  /** Forgets taken spare `spare`'s record in `<dir>/spares` (the box's state holds it now). */
  forget(spare: Spare): void {
    rmSync(spareFile(this.#dir, spare.name, 'json'), { force: true });
  }

  /**
   * Makes spares until {@link SPARE_COUNT} are ready or being made, `delayMs` from now (a refill
   * already scheduled stands).
   */
  schedule(delayMs = REFILL_DELAY_MS): void {
    if (this.#closed || this.#timer) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#fill();
    }, delayMs);
    this.#timer.unref();
  }

  /** Makes spares one after the other until the pool is full. */
  async #fill(): Promise<void> {
    while (!this.#closed && this.#ready.length + this.#making < this.#count) {
      this.#making++;
      try {
        const spare = await this.#make();
        if (this.#closed) await this.#destroy(spare);
        else this.#ready.push(spare);
      } catch (error) {
        this.#log(`spare failed: ${(error as Error).message}`);
        return;
      } finally {
        this.#making--;
      }
    }
  }

  /** One spare (see the module comment); what was made is ended again when a step fails. */
  async #make(): Promise<Spare> {
    const name = `${this.#prefix}${randomBytes(4).toString('hex')}`;
    const record: SpareRecord = { name, slirp: '' };
    writeFileAtomic(spareFile(this.#dir, name, 'json'), JSON.stringify(record));
    const bindTo: Spare['bindTo'] = {};
    let dns: DnsServer | undefined;
    let gate: ChildProcess | undefined;
    try {
      dns = await startDnsServer({
        policy: parseAllowNet([]),
        bind: (addresses, host) => bindTo.bind?.(addresses, host) ?? Promise.resolve(),
      });
      const nsPath = await createGatewayNamespace(name, { nice: SPARE_NICE });
      const hostAddresses = hostIpv4Addresses().sort();
      const rules = gatewayRules({ policy: parseAllowNet([]), dnsPort: dns.port, hostAddresses });
      const started = startGate(nsPath, rules);
      gate = started.gate;
      const [slirp, loaded] = await Promise.allSettled([
        startSlirp({
          netns: nsPath,
          cidr: SLIRP_CIDR,
          apiSocket: spareFile(this.#dir, name, 'sock'),
          logFile: spareFile(this.#dir, name, 'log'),
          disableHostLoopback: false,
          disableDns: true,
          exitWithParent: false,
          nice: SPARE_NICE,
        }),
        started.loaded,
      ]);
      if (slirp.status === 'fulfilled') record.slirp = processIdentity(slirp.value) ?? '';
      writeFileAtomic(spareFile(this.#dir, name, 'json'), JSON.stringify(record));
      if (slirp.status === 'rejected') throw slirp.reason;
      if (loaded.status === 'rejected') throw loaded.reason;
      if (record.slirp === '') throw new Error(`spare ${name}: slirp4netns exited`);
      return {
        ...record,
        slirpPid: slirp.value,
        apiSocket: spareFile(this.#dir, name, 'sock'),
        dns,
        bindTo,
        gate,
        gateExit: started.exit,
        hostAddresses,
      };
    } catch (error) {
      gate?.kill('SIGKILL');
      await dns?.close().catch(() => {});
      await releaseSpare(this.#dir, record);
      throw error;
    }
  }

  /** Ends a spare that was never taken (its gate, resolver, slirp4netns, namespace and files). */
  async #destroy(spare: Spare): Promise<void> {
    spare.gate.kill('SIGKILL');
    await spare.dns.close().catch(() => {});
    await releaseSpare(this.#dir, spare);
  }

  /** Stops refilling and ends every ready spare (and those being made, once made). */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    const spares = this.#ready.splice(0);
    await Promise.all(spares.map((s) => this.#destroy(s)));
  }
}

/**
 * Starts the gate shell in namespace file `nsPath` at niceness {@link SPARE_NICE}: `loaded` resolves
 * once `rules` is in force (rejects with its stderr when the shell exits first), `exit` with its exit
 * code.
 */
function startGate(
  nsPath: string,
  rules: string,
): { gate: ChildProcess; loaded: Promise<void>; exit: Promise<number | null> } {
  const gate = spawn(
    'nice',
    ['-n', String(SPARE_NICE), 'nsenter', `--net=${nsPath}`, '--', 'sh', '-c', GATE_SH],
    {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', RULES: rules },
    },
  );
  gate.stdin?.on('error', () => {});
  const exit = new Promise<number | null>((resolve) => {
    gate.on('error', () => resolve(null));
    gate.on('close', (code) => resolve(code));
  });
  let out = '';
  let err = '';
  gate.stderr?.setEncoding('utf8').on('data', (c: string) => {
    if (err.length < 2000) err += c;
  });
  const loaded = new Promise<void>((resolve, reject) => {
    gate.stdout?.setEncoding('utf8').on('data', (c: string) => {
      out += c;
      if (out.includes('loaded\n')) resolve();
    });
    void exit.then((code) => reject(new Error(`gateway ruleset failed (${code}): ${err.trim()}`)));
  });
  loaded.catch(() => {});
  return { gate, loaded, exit };
}
