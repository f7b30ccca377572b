/**
 * JSON Schemas (draft 2020-12, as OpenAPI 3.1 uses them) of the REST runtime's wire shapes: the snake_case
 * forms of the spec 002 types (`JsBoxOptions` → `BoxOptions`, `JsBoxInfo` → `BoxInfo`, …) and the error body.
 * Each has an `$id`: the server registers them as shared Fastify schemas, routes refer to them as
 * `{ $ref: 'BoxInfo#' }`, and `@fastify/swagger` lists them under `components.schemas` of the generated
 * document. Response schemas describe the answers; they leave objects open (`additionalProperties` unset)
 * so that a field added to a type is answered before it is documented, never dropped.
 */

import { ERROR_CODES } from '../errors.ts';
import { LABEL_KEY_RE, MAX_LABEL_VALUE, MAX_LABELS } from '../runtime/options.ts';

const str = { type: 'string' } as const;
const num = { type: 'number' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const strings = { type: 'array', items: str } as const;

/** An object schema with these properties, the `required` ones listed. */
export function obj(properties: Record<string, unknown>, required: string[] = []): Record<string, unknown> {
  return { type: 'object', properties, ...(required.length > 0 ? { required } : {}) };
}

/** A reference to one of the shared schemas below, by `$id`. */
export function ref(id: string): { $ref: string } {
  return { $ref: `${id}#` };
}

/**
 * `{ "error": { "message", "type", "code", "field"? } }`: the body of every failed request (`wire.ts`);
 * `code` and `type` enumerate `ERROR_CODES` (`src/errors.ts`), each code described with its status.
 */
const ErrorSchema = {
  $id: 'Error',
  description:
    "The body of every failed request: `code` is a stable machine code (the status of the answer is the code's), `type` its category, `field` the request field at fault.",
  ...obj(
    {
      error: obj(
        {
          message: str,
          type: { type: 'string', enum: [...new Set(Object.values(ERROR_CODES).map((c) => c.type))] },
          code: {
            type: 'string',
            enum: Object.keys(ERROR_CODES),
            description: Object.entries(ERROR_CODES)
              .map(([code, info]) => `\`${code}\` (${info.status}): ${info.meaning}`)
              .join('; '),
          },
          field: str,
        },
        ['message', 'type', 'code'],
      ),
    },
    ['error'],
  ),
};

const envList = {
  type: 'array',
  items: obj({ key: str, value: str }, ['key', 'value']),
  description: 'environment variables as a list, so that their names are never case-converted',
};

/** Box labels (`JsBoxOptions.labels`): keys are never case-converted. */
const labels = {
  type: 'object',
  maxProperties: MAX_LABELS,
  propertyNames: { pattern: LABEL_KEY_RE.source },
  additionalProperties: { type: 'string', maxLength: MAX_LABEL_VALUE },
  description:
    'labels of the box (at most 64; keys as written, never case-converted); E2B boxes carry e2b.template and e2b.metadata.<key>',
};

/** `JsBoxOptions` and the box `name` (the body of `POST /v1/boxes`). */
const BoxOptions = {
  $id: 'BoxOptions',
  description:
    'Box options (spec 002 `JsBoxOptions`, snake_case). Host paths never come from a client: `rootfs_path`, host bind mounts and `ports` are refused.',
  ...obj(
    {
      name: { type: 'string', description: 'unique box name' },
      image: str,
      cpus: num,
      memory_mib: int,
      disk_size_gb: num,
      working_dir: str,
      env: envList,
      volumes: {
        type: 'array',
        items: obj({ managed_volume: str, guest_path: str, read_only: bool }, [
          'managed_volume',
          'guest_path',
        ]),
        description: 'managed volumes only; host_path is refused',
      },
      network: obj(
        {
          mode: { enum: ['enabled', 'disabled'] },
          allow_net: { ...strings, description: 'allowed destinations (hosts, CIDRs)' },
        },
        ['mode'],
      ),
      secrets: {
        type: 'array',
        items: obj({ name: str, value: str, hosts: strings, placeholder: str }, ['name', 'value']),
      },
      advanced: obj({ capabilities: obj({ add: strings, drop: strings }) }),
      auto_remove: bool,
      detach: bool,
      isolation: { enum: ['container', 'gvisor'], description: 'isolation tier; default container' },
      auto_pause: { ...num, exclusiveMinimum: 0, description: 'pause after this many idle seconds' },
      auto_delete: { ...num, minimum: 0, description: 'remove this many seconds after stop' },
      auto_resume: { ...bool, description: 'a command on a paused box resumes it first' },
      timeout_ms: { ...num, exclusiveMinimum: 0, description: 'on_timeout ms after creation' },
      on_timeout: { enum: ['stop', 'pause', 'remove'], description: 'timeout action; default stop' },
      entrypoint: {
        ...strings,
        description: "replaces the image's ENTRYPOINT; with cmd, the box's main process (entrypoint + cmd)",
      },
      cmd: { ...strings, description: "replaces the image's CMD" },
      user: { type: 'string', description: 'name|uid[:group|gid] of the main process and default of exec' },
      health_check: obj({
        interval: { type: 'number', minimum: 0.5, description: 'seconds between checks; default 30' },
        timeout: { type: 'number', minimum: 0.1, description: 'seconds a check may take; default 30' },
        retries: { type: 'integer', minimum: 1, description: 'consecutive failures to unhealthy; default 3' },
        start_period: { type: 'number', minimum: 0, description: 'seconds failures do not count; default 0' },
        command: {
          ...strings,
          description:
            "exec form, ['CMD', …] or ['CMD-SHELL', script]; default the image's HEALTHCHECK, else a probe",
        },
      }),
      labels,
    },
    ['image'],
  ),
};

const netRule = obj({ mode: str, allow_net: strings });

/** `JsBoxInfo` (spec 002). */
const BoxInfo = {
  $id: 'BoxInfo',
  description: 'Box metadata (spec 002 `JsBoxInfo`, snake_case)',
  ...obj(
    {
      id: { type: 'string', description: 'ULID' },
      name: str,
      state: obj(
        {
          status: { enum: ['configured', 'running', 'paused', 'stopped', 'failed'] },
          running: bool,
          pid: int,
        },
        ['status', 'running'],
      ),
      created_at: time,
      started_at: time,
      image: str,
      cpus: num,
      memory_mib: int,
      network: {
        oneOf: [
          { type: 'null' },
          obj({
            outbound: netRule,
            inbound: netRule,
            published_ports: {
              description: '[] for boxes created through this server, null when it does not know them',
              oneOf: [
                { type: 'null' },
                {
                  type: 'array',
                  items: obj({ guest_port: int, host_ip: str, host_port: int, protocol: str }),
                },
              ],
            },
            mode: str,
            allow_net: strings,
          }),
        ],
      },
      isolation: obj({ tier: { enum: ['container', 'gvisor'] }, platform: { enum: ['ptrace', 'kvm'] } }, [
        'tier',
      ]),
      health_status: obj(
        {
          state: { enum: ['none', 'starting', 'healthy', 'unhealthy'] },
          failures: int,
          last_check: time,
        },
        ['state', 'failures'],
      ),
      limits_enforced: { const: false, description: 'present when the box runs without its limits' },
      labels,
    },
    ['id', 'state', 'created_at', 'image', 'cpus', 'memory_mib', 'network'],
  ),
};

/** `JsRuntimeMetrics` (spec 002). */
const RuntimeMetrics = {
  $id: 'RuntimeMetrics',
  ...obj(
    {
      boxes_created_total: int,
      boxes_failed_total: int,
      num_running_boxes: int,
      total_commands_executed: int,
      total_exec_errors: int,
    },
    [
      'boxes_created_total',
      'boxes_failed_total',
      'num_running_boxes',
      'total_commands_executed',
      'total_exec_errors',
    ],
  ),
};

/** `JsBoxMetrics` (spec 002): counters, resources (bytes, percent) and creation stages (ms). */
const BoxMetrics = {
  $id: 'BoxMetrics',
  ...obj(
    {
      commands_executed_total: int,
      exec_errors_total: int,
      bytes_sent_total: int,
      bytes_received_total: int,
      cpu_percent: num,
      memory_bytes: int,
      network_bytes_sent: int,
      network_bytes_received: int,
      network_tcp_connections: int,
      network_tcp_errors: int,
      total_create_duration_ms: num,
      guest_boot_duration_ms: num,
      stage_filesystem_setup_ms: num,
      stage_image_prepare_ms: num,
      stage_guest_rootfs_ms: num,
      stage_box_config_ms: num,
      stage_box_spawn_ms: num,
      stage_container_init_ms: num,
    },
    ['commands_executed_total', 'exec_errors_total', 'bytes_sent_total', 'bytes_received_total'],
  ),
};

/** `box.files` entry (`JsEntryInfo`), `modified_time` in ISO 8601. */
const EntryInfo = {
  $id: 'EntryInfo',
  ...obj(
    {
      name: str,
      path: str,
      type: { type: 'string', enum: ['file', 'dir', 'symlink', 'other'] },
      size: int,
      mode: int,
      permissions: str,
      uid: int,
      gid: int,
      modified_time: time,
      symlink_target: str,
    },
    ['name', 'path', 'type', 'size', 'mode', 'permissions', 'uid', 'gid', 'modified_time'],
  ),
};

/** What `files.write` answers. */
const WriteInfo = {
  $id: 'WriteInfo',
  ...obj({ name: str, path: str, type: { type: 'string', enum: ['file'] } }, ['name', 'path', 'type']),
};

/**
 * A command to start (`POST …/executions`, and the start frames of the exec WebSockets): validated by this
 * schema on every path, so an unknown field or a wrong type is a 400 naming the field.
 */
const ExecRequest = {
  $id: 'ExecRequest',
  ...obj(
    {
      cmd: { type: 'string', minLength: 1, description: 'program (PATH lookup inside the box)' },
      args: strings,
      env: envList,
      tty: { ...bool, description: 'allocate a pseudo-terminal' },
      cwd: { type: 'string', description: 'working directory; default the box working_dir' },
      user: { type: 'string', minLength: 1, description: "name|uid[:group|gid]; default the box's user" },
    },
    ['cmd'],
  ),
  additionalProperties: false,
};

/** An execution's status. */
const ExecutionStatus = {
  $id: 'ExecutionStatus',
  ...obj(
    {
      id: { type: 'string', description: 'execution id (ULID)' },
      box_id: str,
      status: { enum: ['running', 'exited'] },
      exit_code: { type: ['integer', 'null'] },
      attached: { ...bool, description: 'a client is attached to its output' },
    },
    ['id', 'box_id', 'status'],
  ),
};

/** A managed volume. */
const Volume = {
  $id: 'Volume',
  ...obj({ id: str, name: { type: ['string', 'null'] }, created_at: time }, ['id', 'created_at']),
};

/** A prepared one-shot tunnel. */
const Tunnel = {
  $id: 'Tunnel',
  ...obj(
    {
      id: str,
      box_id: str,
      port: int,
      connect_path: { type: 'string', description: 'the HTTP CONNECT target, /v1/tunnels/{id}' },
      expires_at: time,
    },
    ['id', 'box_id', 'port', 'connect_path', 'expires_at'],
  ),
};

/** A warm pool kept by the server (`pool-routes.ts`). */
const Pool = {
  $id: 'Pool',
  ...obj(
    {
      id: { type: 'string', description: 'pool id (ULID)' },
      image: str,
      size: { ...int, description: 'boxes kept ready' },
      ready: { ...int, description: 'boxes ready to be handed out now' },
      options: { type: 'object', description: 'the other box options of the pooled boxes (snake_case)' },
    },
    ['id', 'image', 'size', 'ready'],
  ),
};

/** What `images.pull` answers (BoxLite `JsImagePullResult` plus `digest` and `resolved_reference`). */
const ImagePullResult = {
  $id: 'ImagePullResult',
  ...obj({ reference: str, config_digest: str, layer_count: int, digest: str, resolved_reference: str }, [
    'reference',
    'config_digest',
    'layer_count',
  ]),
};

/** One `images.list()` entry. */
const ListedImage = {
  $id: 'ListedImage',
  ...obj({
    reference: str,
    repository: str,
    tag: { type: ['string', 'null'] },
    id: str,
    digest: str,
    size_bytes: int,
    pulled_at: time,
    cached_at: time,
  }),
};

/** Every shared schema, registered on the server and the validators (`validation.ts`). */
export const SHARED_SCHEMAS: readonly Record<string, unknown>[] = [
  ErrorSchema,
  BoxOptions,
  BoxInfo,
  RuntimeMetrics,
  BoxMetrics,
  EntryInfo,
  WriteInfo,
  ExecRequest,
  ExecutionStatus,
  Volume,
  Tunnel,
  Pool,
  ImagePullResult,
  ListedImage,
];
