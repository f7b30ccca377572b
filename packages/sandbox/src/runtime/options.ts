/**
 * Validation and defaults of `JsBoxOptions` (spec 002 "JsBoxOptions" and "Rejections at box creation").
 * Every rejection is a `BoxError` whose message and `field` name the offending option and the rule.
 */
import { DEFAULT_CPUS, DEFAULT_MEMORY_MIB } from '../constants.ts';
import { BoxError, OptionTypeError } from '../errors.ts';
import type { IsolationTier, JsBoxOptions, JsEnvVar, JsVolumeSpec } from '../types.ts';
import { type NormalizedHealthCheck, validateHealthCheck } from './health.ts';
import {
  absolutePath,
  argvList,
  isObject,
  type NormalizedCapabilities,
  type NormalizedNetwork,
  type NormalizedPort,
  type NormalizedSecret,
  optionalBoolean,
  optionalString,
  positiveNumber,
  reject,
  validateAllowUnlimited,
  validateCapabilities,
  validateEnv,
  validateNetwork,
  validatePorts,
  validateSecrets,
  validateUser,
  validateVolumes,
} from './options-fields.ts';

/** Default working directory of a box (spec 002 `JsBoxOptions.workingDir`). */
export const DEFAULT_WORKING_DIR = '/root';
/** Maximum number of processes in one box (not in the spec; a fork bomb stops here). */
export const DEFAULT_PIDS_LIMIT = 1024;

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
  network: NormalizedNetwork;
  ports: NormalizedPort[];
  secrets: NormalizedSecret[];
  capabilities: NormalizedCapabilities;
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
  /** Labels (`validateLabels`); absent when none were given. */
  labels?: Record<string, string>;
}

export type { NormalizedHealthCheck } from './health.ts';
export type {
  NormalizedCapabilities,
  NormalizedNetwork,
  NormalizedPort,
  NormalizedSecret,
} from './options-fields.ts';

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

/** Most labels one box may carry (`JsBoxOptions.labels`). */
export const MAX_LABELS = 64;
/** Longest label value, characters. */
export const MAX_LABEL_VALUE = 256;
/** A label key: 1–63 characters of `[a-z0-9._/-]`, starting with a letter or digit. */
export const LABEL_KEY_RE = /^[a-z0-9][a-z0-9._/-]{0,62}$/;

/**
 * Validates `JsBoxOptions.labels`: an object of at most `MAX_LABELS` members whose keys match
 * `LABEL_KEY_RE` and whose values are strings of at most `MAX_LABEL_VALUE` characters. Returns a copy
 * (undefined when absent or null).
 * @throws BoxError `invalid_option` naming `labels` and the rule broken.
 */
export function validateLabels(value: unknown): Record<string, string> | undefined {
  if (value === undefined || value === null) return undefined;
  if (!isObject(value)) reject('labels', 'must be an object of label keys to strings');
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_LABELS)
    reject('labels', `must have at most ${MAX_LABELS} labels (got ${entries.length})`);
  const labels: Record<string, string> = {};
  for (const [key, label] of entries) {
    if (!LABEL_KEY_RE.test(key)) {
      reject(
        'labels',
        `key '${key.slice(0, 80)}' must be 1-63 characters of a-z, 0-9, ".", "_", "/" or "-", starting with a letter or digit`,
      );
    }
    if (typeof label !== 'string' || label.length > MAX_LABEL_VALUE) {
      reject('labels', `the value of '${key}' must be a string of at most ${MAX_LABEL_VALUE} characters`);
    }
    labels[key] = label as string;
  }
  return labels;
}

/**
 * The predicate of a label filter (`GET /v1/boxes?label=…`, `sandbox ps --label`): a box matches when it
 * has every `key=value` label of `filters` and every bare `key` (any value).
 * @throws BoxError `invalid_option` naming `label` for a filter whose key is no label key.
 */
export function labelFilter(
  filters: readonly string[],
): (info: { labels?: Record<string, string> }) => boolean {
  const wanted = filters.map((filter) => {
    const eq = filter.indexOf('=');
    const key = eq < 0 ? filter : filter.slice(0, eq);
    if (!LABEL_KEY_RE.test(key)) {
      throw new BoxError(
        `invalid label filter '${filter.slice(0, 80)}': must be key=value or key, with a label key`,
        {
          field: 'label',
        },
      );
    }
    return { key, value: eq < 0 ? null : filter.slice(eq + 1) };
  });
  return ({ labels }) =>
    wanted.every(({ key, value }) => {
      const have = labels && Object.hasOwn(labels, key) ? labels[key] : undefined;
      return have !== undefined && (value === null || have === value);
    });
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

/**
 * Refuses the legacy option shapes older SDKs accepted, with a `TypeError` naming the field:
 * `network` as a string, and `allowNet` at the top level (both belong in `network: { mode, allowNet }`).
 * @throws OptionTypeError (code `invalid_option`, `field` `network` or `allowNet`).
 */
export function rejectLegacyShapes(o: Record<string, unknown>): void {
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
  const labels = validateLabels(o.labels);
  if (labels !== undefined) normalized.labels = labels;
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
