/**
 * Validation and defaults of `JsBoxOptions` (spec 002 "JsBoxOptions" and "Rejections at box creation").
 * Every rejection is a `BoxError` whose message and `field` name the offending option and the rule.
 */
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import { DEFAULT_CPUS, DEFAULT_MEMORY_MIB } from '../constants.ts';
import { BoxError, OptionTypeError } from '../errors.ts';
import { parseAllowNet } from '../network/policy.ts';
import type {
  IsolationTier,
  JsBoxOptions,
  JsEnvVar,
  JsPortSpec,
  JsVolumeSpec,
  NetworkSpec,
  Secret,
} from '../types.ts';
import { type NormalizedHealthCheck, validateHealthCheck } from './health.ts';

/** Default working directory of a box (spec 002 `JsBoxOptions.workingDir`). */
export const DEFAULT_WORKING_DIR = '/root';
/** Maximum number of processes in one box (not in the spec; a fork bomb stops here). */
export const DEFAULT_PIDS_LIMIT = 1024;

/** A port mapping with defaults applied (`protocol` `tcp`, `hostIp` `0.0.0.0`). */
export interface NormalizedPort {
  hostPort?: number;
  guestPort: number;
  protocol: 'tcp';
  hostIp: string;
}

/** A secret rule with its default placeholder applied. */
export interface NormalizedSecret {
  name: string;
  value: string;
  hosts: string[];
  placeholder: string;
}

/** `JsBoxOptions` after validation, with every default of the spec applied. */
export interface NormalizedBoxOptions {
  image?: string;
  rootfsPath?: string;
  cpus: number;
  memoryMib: number;
  diskSizeGb?: number;
  workingDir: string;
  env: JsEnvVar[];
  volumes: JsVolumeSpec[];
  network: { mode: 'enabled' | 'disabled'; allowNet: string[] };
  ports: NormalizedPort[];
  secrets: NormalizedSecret[];
  capabilities: { add: string[]; drop: string[] };
  /** `advanced.allowUnlimited` (rootless runtimes without a delegated cgroup subtree). */
  allowUnlimited?: true;
  /** Set by a rootless local runtime when the box runs without limits; not by validation. */
  limitsEnforced?: false;
  autoRemove: boolean;
  detach: boolean;
  /** Isolation tier (`JsBoxOptions.isolation`, default `container`; `JsRuntime` fills in its own default). */
  isolation: IsolationTier;
  /** gVisor platform the box was started on; set by the local runtime, not by validation. */
  gvisorPlatform?: 'ptrace' | 'kvm';
  /** Replacement of the image's ENTRYPOINT (may be empty: no entrypoint). */
  entrypoint?: string[];
  /** Replacement of the image's CMD (may be empty). */
  cmd?: string[];
  /** User of the main process and default user of commands, `name|uid[:group|gid]`. */
  user?: string;
  /** Health check with its defaults applied. */
  healthCheck?: NormalizedHealthCheck;
}

export type { NormalizedHealthCheck } from './health.ts';

/** What a runtime accepts beyond the options themselves. */
export interface ValidateContext {
  /** false for a REST runtime: host bind mounts are refused (spec 002 rejection 4). Default true. */
  allowHostBinds?: boolean;
}

/**
 * Checks an isolation tier (`JsOptions.isolation`, `JsBoxOptions.isolation`).
 * @throws BoxError naming `field` unless it is `container` or `gvisor`.
 */
export function validateIsolation(value: unknown, field: string): IsolationTier | undefined {
  if (value === undefined || value === null) return undefined;
  if (value !== 'container' && value !== 'gvisor') reject(field, "must be 'container' or 'gvisor'");
  return value;
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const ENV_KEY_RE = /^[^=\0]+$/;
const CAP_RE = /^(CAP_)?[A-Z_]+$/;

function reject(field: string, rule: string): never {
  throw new BoxError(`invalid box option ${field}: ${rule}`, { field });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') reject(field, 'must be a non-empty string');
  return value;
}

function stringArray(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) reject(field, 'must be an array of strings');
  return value.map((item, i) => {
    if (typeof item !== 'string' || item === '') reject(`${field}[${i}]`, 'must be a non-empty string');
    return item;
  });
}

function positiveNumber(value: unknown, field: string, fallback: number | undefined): number | undefined {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    reject(field, 'must be a positive number');
  }
  return value;
}

function absolutePath(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') reject(field, 'is required and must be a non-empty string');
  if (!isAbsolute(value)) reject(field, `must be an absolute path, got '${value}'`);
  if (value.includes('\0')) reject(field, 'must not contain NUL');
  return value;
}

function port(value: unknown, field: string, allowZero: boolean): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < (allowZero ? 0 : 1) || value > 65535) {
    reject(field, `must be an integer from ${allowZero ? 0 : 1} to 65535`);
  }
  return value;
}

/** Validates a box name: 1–63 characters of `[A-Za-z0-9_.-]`, starting with a letter or digit. */
export function validateBoxName(name: unknown): string | undefined {
  if (name === undefined || name === null) return undefined;
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    reject(
      'name',
      'must be 1-63 characters of letters, digits, "_", "." or "-", starting with a letter or digit',
    );
  }
  return name;
}

function validateEnv(env: unknown): JsEnvVar[] {
  if (env === undefined || env === null) return [];
  if (!Array.isArray(env)) reject('env', 'must be an array of { key, value }');
  return env.map((item, i) => {
    if (!isObject(item)) reject(`env[${i}]`, 'must be an object { key, value }');
    if (typeof item.key !== 'string' || !ENV_KEY_RE.test(item.key)) {
      reject(`env[${i}].key`, 'must be a non-empty string without "=" or NUL');
    }
    if (typeof item.value !== 'string' || item.value.includes('\0')) {
      reject(`env[${i}].value`, 'must be a string without NUL');
    }
    return { key: item.key, value: item.value };
  });
}

function validateVolumes(volumes: unknown, allowHostBinds: boolean): JsVolumeSpec[] {
  if (volumes === undefined || volumes === null) return [];
  if (!Array.isArray(volumes)) reject('volumes', 'must be an array of volume specs');
  const guestPaths = new Set<string>();
  return volumes.map((item, i) => {
    const field = `volumes[${i}]`;
    if (!isObject(item)) reject(field, 'must be an object');
    const hasManaged = item.managedVolume !== undefined && item.managedVolume !== null;
    const hasHost = item.hostPath !== undefined && item.hostPath !== null;
    // Spec 002 rejection 1: exactly one origin.
    if (hasManaged === hasHost) reject(field, 'set exactly one of managedVolume and hostPath');
    const guestPath = absolutePath(item.guestPath, `${field}.guestPath`);
    if (guestPaths.has(guestPath)) reject(`${field}.guestPath`, `'${guestPath}' is mounted twice`);
    guestPaths.add(guestPath);
    if (item.readOnly !== undefined && item.readOnly !== null && typeof item.readOnly !== 'boolean') {
      reject(`${field}.readOnly`, 'must be a boolean');
    }
    const readOnly = item.readOnly === true;
    if (hasManaged) {
      // Spec 002 rejection 2: a managed volume is always writable.
      if (readOnly)
        reject(`${field}.readOnly`, 'true is rejected on a managed volume (only false is accepted)');
      const managedVolume = optionalString(item.managedVolume, `${field}.managedVolume`)!;
      return { managedVolume, guestPath, readOnly: false };
    }
    // Spec 002 rejection 4: a REST runtime refuses host bind mounts.
    if (!allowHostBinds) reject(`${field}.hostPath`, 'host bind mounts are refused by a REST runtime');
    const hostPath = absolutePath(item.hostPath, `${field}.hostPath`);
    return { hostPath, guestPath, readOnly };
  });
}

function validateNetwork(network: unknown): NormalizedBoxOptions['network'] {
  if (network === undefined || network === null) return { mode: 'enabled', allowNet: [] };
  if (!isObject(network)) reject('network', "must be an object { mode: 'enabled' | 'disabled', allowNet? }");
  const spec = network as Partial<NetworkSpec>;
  if (spec.mode !== 'enabled' && spec.mode !== 'disabled') {
    reject('network.mode', "is required and must be 'enabled' or 'disabled'");
  }
  const allowNet = stringArray(spec.allowNet, 'network.allowNet');
  if (spec.mode === 'disabled' && allowNet.length > 0) {
    reject('network.allowNet', "is only allowed with mode 'enabled'");
  }
  parseAllowNet(allowNet); // hostnames, `*.` wildcards, IPs, CIDRs; BoxError naming network.allowNet[i]
  return { mode: spec.mode, allowNet };
}

function validatePorts(ports: unknown): NormalizedPort[] {
  if (ports === undefined || ports === null) return [];
  if (!Array.isArray(ports)) reject('ports', 'must be an array of port specs');
  const seen = new Set<string>();
  return ports.map((item, i) => {
    const field = `ports[${i}]`;
    if (!isObject(item)) reject(field, 'must be an object');
    const spec = item as Partial<JsPortSpec>;
    const protocol = spec.protocol === undefined || spec.protocol === null ? 'tcp' : spec.protocol;
    if (typeof protocol !== 'string') reject(`${field}.protocol`, "must be 'tcp'");
    // Spec 002 rejection 3: UDP port mappings are rejected.
    if (protocol.toLowerCase() === 'udp')
      reject(`${field}.protocol`, "UDP is rejected; only 'tcp' is supported");
    if (protocol.toLowerCase() !== 'tcp')
      reject(`${field}.protocol`, `'${protocol}' is not supported; use 'tcp'`);
    const guestPort = port(spec.guestPort, `${field}.guestPort`, false);
    const hostPort =
      spec.hostPort === undefined || spec.hostPort === null
        ? undefined
        : port(spec.hostPort, `${field}.hostPort`, true);
    const hostIp = spec.hostIp ?? '0.0.0.0';
    if (typeof hostIp !== 'string' || isIP(hostIp) === 0)
      reject(`${field}.hostIp`, 'must be an IPv4 or IPv6 address');
    if (hostPort) {
      const key = `${hostIp}:${hostPort}`;
      if (seen.has(key)) reject(`${field}.hostPort`, `${key} is mapped twice`);
      seen.add(key);
    }
    return { ...(hostPort ? { hostPort } : {}), guestPort, protocol: 'tcp', hostIp };
  });
}

function validateSecrets(secrets: unknown): NormalizedSecret[] {
  if (secrets === undefined || secrets === null) return [];
  if (!Array.isArray(secrets)) reject('secrets', 'must be an array of secrets');
  return secrets.map((item, i) => {
    const field = `secrets[${i}]`;
    if (!isObject(item)) reject(field, 'must be an object');
    const spec = item as Partial<Secret>;
    const name = optionalString(spec.name, `${field}.name`);
    if (name === undefined) reject(`${field}.name`, 'is required');
    // The box sees the placeholder in an environment variable of this name.
    if (!ENV_KEY_RE.test(name)) reject(`${field}.name`, 'must be an environment variable name (no "=")');
    if (typeof spec.value !== 'string' || spec.value === '') reject(`${field}.value`, 'is required');
    const placeholder = optionalString(spec.placeholder, `${field}.placeholder`) ?? `<SECRET:${name}>`;
    return { name, value: spec.value, hosts: stringArray(spec.hosts, `${field}.hosts`), placeholder };
  });
}

function validateCapabilities(advanced: unknown): NormalizedBoxOptions['capabilities'] {
  if (advanced === undefined || advanced === null) return { add: [], drop: [] };
  if (!isObject(advanced)) reject('advanced', 'must be an object');
  const caps = advanced.capabilities;
  if (caps === undefined || caps === null) return { add: [], drop: [] };
  if (!isObject(caps)) reject('advanced.capabilities', 'must be an object { add?, drop? }');
  const norm = (list: string[], field: string) =>
    list.map((cap, i) => {
      const upper = cap.toUpperCase();
      if (!CAP_RE.test(upper)) reject(`${field}[${i}]`, `'${cap}' is not a Linux capability name`);
      return upper.startsWith('CAP_') ? upper : `CAP_${upper}`;
    });
  return {
    add: norm(stringArray(caps.add, 'advanced.capabilities.add'), 'advanced.capabilities.add'),
    drop: norm(stringArray(caps.drop, 'advanced.capabilities.drop'), 'advanced.capabilities.drop'),
  };
}

/** `advanced.allowUnlimited`: a boolean, default false. */
function validateAllowUnlimited(advanced: unknown): boolean {
  if (!isObject(advanced) || advanced.allowUnlimited === undefined) return false;
  if (typeof advanced.allowUnlimited !== 'boolean') reject('advanced.allowUnlimited', 'must be a boolean');
  return advanced.allowUnlimited;
}

/** An argv list: an array of strings without NUL (may be empty). */
function argvList(value: unknown, field: string): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) reject(field, 'must be an array of strings (exec form)');
  return value.map((item, i) => {
    if (typeof item !== 'string' || item.includes('\0'))
      reject(`${field}[${i}]`, 'must be a string without NUL');
    return item;
  });
}

const USER_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?$/;

function validateUser(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || !USER_RE.test(value)) {
    reject('user', "must be 'name', 'uid', 'name:group' or 'uid:gid' (letters, digits, '_', '.', '-')");
  }
  return value;
}

function optionalBoolean(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'boolean') reject(field, 'must be a boolean');
  return value;
}

/**
 * Refuses the legacy option shapes older SDKs accepted, with a `TypeError` naming the field:
 * `network` as a string, and `allowNet` at the top level (both belong in `network: { mode, allowNet }`).
 */
function rejectLegacyShapes(o: Record<string, unknown>): void {
  if (typeof o.network === 'string') {
    throw new OptionTypeError(
      'network',
      `invalid box option network: a string ('${o.network}') is not accepted; use network: { mode: '${o.network}' }`,
    );
  }
  if ('allowNet' in o) {
    throw new OptionTypeError(
      'allowNet',
      "invalid box option allowNet: not a top-level option; use network: { mode: 'enabled', allowNet: [...] }",
    );
  }
}

/**
 * Validates `JsBoxOptions` and applies the spec's defaults (`cpus` 1, `memoryMib` 512, `workingDir`
 * `/root`, `network` `{ mode: 'enabled' }`, `protocol` `tcp`, `hostIp` `0.0.0.0`, placeholder
 * `<SECRET:${name}>`, `autoRemove` and `detach` false) and BoxLite's `entrypoint`, `cmd`, `user` and
 * `healthCheck` (seconds; defaults interval 30, timeout 30, retries 3, startPeriod 0).
 * @throws BoxError naming the field for any invalid value, including the four rejections of spec 002
 *   (volume origin not exactly one, `readOnly: true` on a managed volume, UDP port, host bind over REST).
 */
export function validateBoxOptions(options: unknown, context: ValidateContext = {}): NormalizedBoxOptions {
  if (!isObject(options)) throw new BoxError('box options must be an object', { field: 'options' });
  const o = options as JsBoxOptions;
  rejectLegacyShapes(options);
  const image = optionalString(o.image, 'image');
  const rootfsPath = o.rootfsPath === undefined || o.rootfsPath === null ? undefined : o.rootfsPath;
  if (image === undefined && rootfsPath === undefined)
    reject('image', 'one of image and rootfsPath is required');
  if (image !== undefined && rootfsPath !== undefined)
    reject('rootfsPath', 'set only one of image and rootfsPath');
  if (rootfsPath !== undefined) {
    if (context.allowHostBinds === false)
      reject('rootfsPath', 'a host rootfs path is refused by a REST runtime');
    absolutePath(rootfsPath, 'rootfsPath');
  }
  const memoryMib = positiveNumber(o.memoryMib, 'memoryMib', DEFAULT_MEMORY_MIB)!;
  if (!Number.isInteger(memoryMib) || memoryMib < 16)
    reject('memoryMib', 'must be an integer of at least 16 (MiB)');
  const normalized: NormalizedBoxOptions = {
    ...(image !== undefined ? { image } : {}),
    ...(rootfsPath !== undefined ? { rootfsPath } : {}),
    cpus: positiveNumber(o.cpus, 'cpus', DEFAULT_CPUS)!,
    memoryMib,
    workingDir:
      o.workingDir === undefined || o.workingDir === null
        ? DEFAULT_WORKING_DIR
        : absolutePath(o.workingDir, 'workingDir'),
    env: validateEnv(o.env),
    volumes: validateVolumes(o.volumes, context.allowHostBinds !== false),
    network: validateNetwork(o.network),
    ports: validatePorts(o.ports),
    secrets: validateSecrets(o.secrets),
    capabilities: validateCapabilities(o.advanced),
    ...(validateAllowUnlimited(o.advanced) ? { allowUnlimited: true as const } : {}),
    autoRemove: optionalBoolean(o.autoRemove, 'autoRemove', false),
    detach: optionalBoolean(o.detach, 'detach', false),
    isolation: validateIsolation(o.isolation, 'isolation') ?? 'container',
  };
  const diskSizeGb = positiveNumber(o.diskSizeGb, 'diskSizeGb', undefined);
  if (diskSizeGb !== undefined) normalized.diskSizeGb = diskSizeGb;
  const entrypoint = argvList(o.entrypoint, 'entrypoint');
  if (entrypoint !== undefined) normalized.entrypoint = entrypoint;
  const cmd = argvList(o.cmd, 'cmd');
  if (cmd !== undefined) normalized.cmd = cmd;
  if (entrypoint?.length === 0 && cmd?.length === 0) {
    reject('cmd', 'the main process needs a program: entrypoint and cmd are both empty');
  }
  const user = validateUser(o.user);
  if (user !== undefined) normalized.user = user;
  const healthCheck = validateHealthCheck(o.healthCheck);
  if (healthCheck !== undefined) normalized.healthCheck = healthCheck;
  return normalized;
}

/**
 * The argv of a box's main process (BoxLite: "final execution = entrypoint + cmd", Docker's rule):
 * `entrypoint` (else the image's ENTRYPOINT) followed by `cmd` (else, when `entrypoint` was not given,
 * the image's CMD). Null when neither option is set: the box then runs no main process.
 * @throws BoxError naming `cmd` when the result names no program (e.g. an image without ENTRYPOINT and
 *   an empty `cmd`).
 */
export function mainProcessArgv(
  options: Pick<NormalizedBoxOptions, 'entrypoint' | 'cmd'>,
  image: { entrypoint: string[] | null; cmd: string[] | null },
): string[] | null {
  if (options.entrypoint === undefined && options.cmd === undefined) return null;
  const entry = options.entrypoint ?? image.entrypoint ?? [];
  const args = options.cmd ?? (options.entrypoint !== undefined ? [] : (image.cmd ?? []));
  const argv = [...entry, ...args];
  if (argv.length === 0 || argv[0] === '') {
    reject('cmd', 'the main process names no program (the image has no ENTRYPOINT); give entrypoint or cmd');
  }
  return argv;
}
