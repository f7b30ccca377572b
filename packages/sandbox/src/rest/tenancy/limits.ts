/**
 * The limits file of the shared service: per-tenant quotas and rates, and the
 * node's admission margins, as JSON (snake_case) validated with Ajv. The file is re-read whenever it
 * changes (checked at each use: a `stat`); a file that fails validation is reported and the last valid
 * limits stay in force. Without a file the defaults below apply.
 *
 * ```json
 * {
 *   "defaults": { "running_boxes": 10, "vcpus": 16, "memory_mib": 16384, "disk_gb": 200,
 *                 "snapshot_bytes": 53687091200, "exec_per_second": 50, "running_executions": 100,
 *                 "create_per_minute": 60, "files_per_second": 200 },
 *   "tenants": { "acme": { "running_boxes": 50 } },
 *   "node": { "reserve_memory_mib": 1024, "memory_overcommit": 1, "reserve_disk_gb": 2,
 *             "pids_per_box": 128, "retry_after_s": 5 }
 * }
 * ```
 * A tenant's entry overrides the defaults field by field; `null` means unlimited. The operator is bound
 * by the node margins only.
 */
import { Ajv } from 'ajv';
import { readJson, stampOf } from './state-file.ts';

/** Per-tenant quotas (null: unlimited). Units in the names: MiB, GiB, bytes, per second, per minute. */
export interface TenantLimits {
  /** Boxes running (or paused) at once. */
  running_boxes: number | null;
  /** vCPUs of the tenant's running boxes, summed. */
  vcpus: number | null;
  /** Memory of the tenant's running boxes, MiB, summed. */
  memory_mib: number | null;
  /** Disk of all the tenant's boxes (running or not), GiB, summed. */
  disk_gb: number | null;
  /** Bytes held by the tenant's snapshots. */
  snapshot_bytes: number | null;
  /** Commands started per second (rate). */
  exec_per_second: number | null;
  /** Commands running at once (started over the server and not yet ended; `executions.ts`). */
  running_executions: number | null;
  /** Boxes created per minute (rate). */
  create_per_minute: number | null;
  /** File operations per second (rate). */
  files_per_second: number | null;
}

/** What the node keeps free: admission refuses (503 `capacity`) a box that would eat into it. */
export interface NodeLimits {
  /** Memory kept for the host, MiB. */
  reserve_memory_mib: number;
  /** Committed memory (running boxes' limits) may reach `MemTotal × memory_overcommit − reserve`. */
  memory_overcommit: number;
  /** Disk kept free on the runtime's filesystem, GiB. */
  reserve_disk_gb: number;
  /** Processes a new box is assumed to need against the kernel's process limit. */
  pids_per_box: number;
  /** The `Retry-After` of a 503, s. */
  retry_after_s: number;
}

/** The whole limits file, defaults filled in. */
export interface LimitsConfig {
  defaults: TenantLimits;
  tenants: Record<string, Partial<TenantLimits>>;
  node: NodeLimits;
}

/** The limits without a file. */
export const DEFAULT_LIMITS: LimitsConfig = {
  defaults: {
    running_boxes: 10,
    vcpus: 16,
    memory_mib: 16384,
    disk_gb: 200,
    snapshot_bytes: 50 * 1024 ** 3,
    exec_per_second: 50,
    running_executions: 100,
    create_per_minute: 60,
    files_per_second: 200,
  },
  tenants: {},
  node: {
    reserve_memory_mib: 1024,
    memory_overcommit: 1,
    reserve_disk_gb: 2,
    pids_per_box: 128,
    retry_after_s: 5,
  },
};

const limit = { type: ['number', 'null'], minimum: 0 };
const tenantSchema = {
  type: 'object',
  additionalProperties: false,
  properties: Object.fromEntries(Object.keys(DEFAULT_LIMITS.defaults).map((key) => [key, limit])),
};
const validate = new Ajv({ allErrors: false, strict: true, allowUnionTypes: true }).compile({
  type: 'object',
  additionalProperties: false,
  properties: {
    defaults: tenantSchema,
    tenants: { type: 'object', additionalProperties: tenantSchema },
    node: {
      type: 'object',
      additionalProperties: false,
      properties: {
        reserve_memory_mib: { type: 'number', minimum: 0 },
        memory_overcommit: { type: 'number', exclusiveMinimum: 0 },
        reserve_disk_gb: { type: 'number', minimum: 0 },
        pids_per_box: { type: 'integer', minimum: 0 },
        retry_after_s: { type: 'integer', minimum: 1 },
      },
    },
  },
});

/**
 * Parses a limits document (see the module comment), defaults filled in.
 * @throws Error naming the field and the rule.
 */
export function parseLimits(value: unknown): LimitsConfig {
  if (!validate(value)) {
    const error = validate.errors?.[0];
    const extra =
      error?.keyword === 'additionalProperties' ? ` '${String(error.params.additionalProperty)}'` : '';
    throw new Error(`limits${error?.instancePath ?? ''}: ${error?.message ?? 'invalid'}${extra}`);
  }
  const doc = value as Partial<{
    defaults: Partial<TenantLimits>;
    tenants: Record<string, Partial<TenantLimits>>;
    node: Partial<NodeLimits>;
  }>;
  return {
    defaults: { ...DEFAULT_LIMITS.defaults, ...doc.defaults },
    tenants: doc.tenants ?? {},
    node: { ...DEFAULT_LIMITS.node, ...doc.node },
  };
}

/** The limits file of one server, re-read on change (see the module comment). */
export class LimitsFile {
  /** Path of the file (absent: the defaults). */
  readonly path: string | null;
  #stamp = '';
  #config: LimitsConfig = DEFAULT_LIMITS;
  #version = 0;
  readonly #onError: (error: Error) => void;

  /**
   * @param path the limits file, or null for the defaults.
   * @param onError told when a changed file is invalid (the last valid limits stay).
   * @throws Error when the file exists at start and is invalid (a server must not start on a bad file).
   */
  constructor(path: string | null, onError: (error: Error) => void = () => {}) {
    this.path = path;
    this.#onError = onError;
    if (path) {
      this.#stamp = stampOf(path);
      if (this.#stamp) this.#config = parseLimits(readJson(path, {}));
    }
  }

  /** Bumped every time the limits change (rate limiters are rebuilt then). */
  get version(): number {
    this.current();
    return this.#version;
  }

  /** The limits in force (the file re-read when it changed). */
  current(): LimitsConfig {
    if (!this.path) return this.#config;
    const stamp = stampOf(this.path);
    if (stamp !== this.#stamp) {
      this.#stamp = stamp;
      try {
        this.#config = stamp ? parseLimits(readJson(this.path, {})) : DEFAULT_LIMITS;
        this.#version++;
      } catch (error) {
        this.#onError(error as Error);
      }
    }
    return this.#config;
  }

  /** The quotas and rates of `tenant`. */
  tenant(tenant: string): TenantLimits {
    const config = this.current();
    return { ...config.defaults, ...(Object.hasOwn(config.tenants, tenant) ? config.tenants[tenant] : {}) };
  }
}
