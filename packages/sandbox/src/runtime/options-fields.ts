/**
 * Checks of the single fields of `JsBoxOptions` (spec 002 "JsBoxOptions" and "Rejections at box
 * creation"), used by `validateBoxOptions` (`options.ts`): each returns the field with its defaults
 * applied, or throws a `BoxError` whose message and `field` name the offending option and the rule.
 */
import { isIP } from 'node:net';
import { isAbsolute } from 'node:path';
import { BoxError } from '../errors.ts';
import { parseAllowNet } from '../network/policy.ts';
import type { JsEnvVar, JsPortSpec, JsVolumeSpec, NetworkSpec, Secret } from '../types.ts';

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

/** The network of a box: `mode` and, with `enabled`, the allowed destinations. */
export interface NormalizedNetwork {
  mode: 'enabled' | 'disabled';
  allowNet: string[];
}

/** Linux capabilities added to and dropped from a box's default set, as `CAP_*` names. */
export interface NormalizedCapabilities {
  add: string[];
  drop: string[];
}

const ENV_KEY_RE = /^[^=\0]+$/;
const CAP_RE = /^(CAP_)?[A-Z_]+$/;

/**
 * Rejects a box option.
 * @throws BoxError `invalid_option` naming `field`: "invalid box option <field>: <rule>".
 */
export function reject(field: string, rule: string): never {
  throw new BoxError(`invalid box option ${field}: ${rule}`, { field });
}

/** True for a plain object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An optional non-empty string (undefined when absent). @throws BoxError naming `field` otherwise. */
export function optionalString(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') reject(field, 'must be a non-empty string');
  return value;
}

/** An optional array of non-empty strings (empty when absent). @throws BoxError naming `field[i]`. */
function stringArray(value: unknown, field: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) reject(field, 'must be an array of strings');
  return value.map((item, i) => {
    if (typeof item !== 'string' || item === '') reject(`${field}[${i}]`, 'must be a non-empty string');
    return item;
  });
}

/** An optional positive finite number (`fallback` when absent). @throws BoxError naming `field`. */
export function positiveNumber(
  value: unknown,
  field: string,
  fallback: number | undefined,
): number | undefined {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    reject(field, 'must be a positive number');
  }
  return value;
}

/** A required absolute path without NUL. @throws BoxError naming `field`. */
export function absolutePath(value: unknown, field: string): string {
  if (typeof value !== 'string' || value === '') reject(field, 'is required and must be a non-empty string');
  if (!isAbsolute(value)) reject(field, `must be an absolute path, got '${value}'`);
  if (value.includes('\0')) reject(field, 'must not contain NUL');
  return value;
}

/** A TCP port number, 1–65535 (0 too with `allowZero`). @throws BoxError naming `field`. */
function port(value: unknown, field: string, allowZero: boolean): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < (allowZero ? 0 : 1) || value > 65535) {
    reject(field, `must be an integer from ${allowZero ? 0 : 1} to 65535`);
  }
  return value;
}

/**
 * Maps an optional array option (`[]` when absent) item by item, in order: each item must be an object,
 * handed to `check` with its field name `<field>[i]`.
 * @throws BoxError naming `field` (not an array: `arrayRule`) or `<field>[i]` (not an object).
 */
function mapObjects<T>(
  value: unknown,
  field: string,
  arrayRule: string,
  check: (item: Record<string, unknown>, itemField: string) => T,
): T[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) reject(field, arrayRule);
  return value.map((item, i) => {
    const itemField = `${field}[${i}]`;
    if (!isObject(item)) reject(itemField, 'must be an object');
    return check(item, itemField);
  });
}

/** `env`: an array of `{ key, value }` (key without `=` or NUL, value without NUL); default empty. */
export function validateEnv(env: unknown): JsEnvVar[] {
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

/**
 * `volumes`: exactly one of `managedVolume` and `hostPath` each (rejection 1), an absolute `guestPath`
 * mounted once, a managed volume never read-only (rejection 2), host paths refused when `allowHostBinds`
 * is false (rejection 4).
 */
export function validateVolumes(volumes: unknown, allowHostBinds: boolean): JsVolumeSpec[] {
  const guestPaths = new Set<string>();
  return mapObjects(volumes, 'volumes', 'must be an array of volume specs', (item, field) => {
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

/** `network`: `{ mode, allowNet? }` (`allowNet` only when enabled); default `{ mode: 'enabled' }`. */
export function validateNetwork(network: unknown): NormalizedNetwork {
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

/** `ports`: TCP mappings only (rejection 3), each host address and port mapped once. */
export function validatePorts(ports: unknown): NormalizedPort[] {
  const seen = new Set<string>();
  return mapObjects(ports, 'ports', 'must be an array of port specs', (item, field) => {
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

/** `secrets`: `name` (an environment variable name) and `value` required; `placeholder` `<SECRET:name>`. */
export function validateSecrets(secrets: unknown): NormalizedSecret[] {
  return mapObjects(secrets, 'secrets', 'must be an array of secrets', (item, field) => {
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

/** `advanced.capabilities`: `{ add?, drop? }` of Linux capability names, normalized to `CAP_*`. */
export function validateCapabilities(advanced: unknown): NormalizedCapabilities {
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
export function validateAllowUnlimited(advanced: unknown): boolean {
  if (!isObject(advanced) || advanced.allowUnlimited === undefined) return false;
  if (typeof advanced.allowUnlimited !== 'boolean') reject('advanced.allowUnlimited', 'must be a boolean');
  return advanced.allowUnlimited;
}

/** An argv list: an array of strings without NUL (may be empty). */
export function argvList(value: unknown, field: string): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) reject(field, 'must be an array of strings (exec form)');
  return value.map((item, i) => {
    if (typeof item !== 'string' || item.includes('\0'))
      reject(`${field}[${i}]`, 'must be a string without NUL');
    return item;
  });
}

const USER_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?$/;

/** `user`: `name`, `uid`, `name:group` or `uid:gid`. */
export function validateUser(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || !USER_RE.test(value)) {
    reject('user', "must be 'name', 'uid', 'name:group' or 'uid:gid' (letters, digits, '_', '.', '-')");
  }
  return value;
}

/** An optional boolean (`fallback` when absent). @throws BoxError naming `field`. */
export function optionalBoolean(value: unknown, field: string, fallback: boolean): boolean {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'boolean') reject(field, 'must be a boolean');
  return value;
}
