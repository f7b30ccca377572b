/**
 * The OpenAPI 3.1 document of the REST runtime (issue 10), served at `GET /v1/openapi.json`. Schemas are
 * the snake_case forms of the spec 002 shapes (`JsBoxOptions` → `BoxOptions`, `JsBoxInfo` → `BoxInfo`…).
 */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown) => ({ content: { 'application/json': { schema } } });
const errors = {
  '400': { description: 'invalid request (the error names the field and the rule)', ...json(ref('Error')) },
  '401': { description: 'missing or invalid bearer credential', ...json(ref('Error')) },
  '403': {
    description: 'permission missing (token) or non-loopback client without credentials',
    ...json(ref('Error')),
  },
  '404': { description: 'no such box, volume, execution or tunnel', ...json(ref('Error')) },
  '409': {
    description:
      'state conflict (box running, not running, name taken, client already attached, a directory in the way)',
    ...json(ref('Error')),
  },
};
const pathQuery = {
  name: 'path',
  in: 'query',
  required: true,
  description: 'absolute path inside the box (resolved inside the box root; symlinks never leave it)',
  schema: { type: 'string' },
};
const boxParam = {
  name: 'box',
  in: 'path',
  required: true,
  description: 'box id (ULID) or name',
  schema: { type: 'string' },
};
const execParam = {
  name: 'execution',
  in: 'path',
  required: true,
  description: 'execution id (ULID)',
  schema: { type: 'string' },
};
const volumeParam = {
  name: 'volume',
  in: 'path',
  required: true,
  description: 'volume id or name',
  schema: { type: 'string' },
};
const security = (permission: string) => [{ bearer: [permission] }];
const op = (
  summary: string,
  permission: string,
  responses: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) => ({
  summary,
  security: security(permission),
  ...extra,
  responses: { ...responses, ...errors },
});
const str = { type: 'string' };
const num = { type: 'number' };
const int = { type: 'integer' };
const bool = { type: 'boolean' };
const obj = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object',
  properties,
  required,
});

/** The OpenAPI 3.1 document (a fresh object on every call). */
export function openApiDocument(): Record<string, unknown> {
  const execution = ref('ExecutionStatus');
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sandbox REST runtime',
      version: '1',
      description:
        'A local sandbox runtime (spec 002) over HTTP. JSON in snake_case; errors are { "error": { "message", "type", "code", "field"? } }. ' +
        'Exec streams: WebSocket GET /v1/boxes/{box}/executions/{execution}/attach?offset=N — binary frames with a one-byte channel prefix ' +
        '(0 stdin, 1 stdout, 2 stderr); text frames {"type":"resize","cols","rows"}, {"type":"signal","signal"}, {"type":"stdin_eof"} from the ' +
        'client and {"type":"exit","exit_code","offset"}, {"type":"backlog_truncated","dropped_bytes"} from the server; one attached client at a ' +
        'time (409). Many executions over one connection: WebSocket GET /v1/executions/stream — the same frames, each naming its stream (a ' +
        'client-chosen number 1..2^32-1): binary frames put it after the channel byte (uint32 big-endian), text frames carry "stream"; start with ' +
        '{"type":"start","stream","box",cmd,…}, answered by {"type":"started","stream","id","box_id"} or {"type":"error","stream","status","error"}. ' +
        'Tunnels: POST /v1/boxes/{box}/tunnels, then HTTP CONNECT /v1/tunnels/{id} (one-shot).',
    },
    components: {
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description:
            'API key, or an access token (JWT) of the auth service carrying sandbox.boxes.read, sandbox.boxes.write or sandbox.exec',
        },
      },
      schemas: {
        EntryInfo: obj(
          {
            name: str,
            path: str,
            type: { type: 'string', enum: ['file', 'dir', 'symlink', 'other'] },
            size: int,
            mode: int,
            permissions: str,
            uid: int,
            gid: int,
            modified_time: { type: 'string', format: 'date-time' },
            symlink_target: str,
          },
          ['name', 'path', 'type', 'size', 'mode', 'permissions', 'uid', 'gid', 'modified_time'],
        ),
        WriteInfo: obj({ name: str, path: str, type: { type: 'string', enum: ['file'] } }, [
          'name',
          'path',
          'type',
        ]),
        Error: obj(
          { error: obj({ message: str, type: str, code: str, field: str }, ['message', 'type', 'code']) },
          ['error'],
        ),
        BoxOptions: obj(
          {
            name: str,
            image: str,
            cpus: num,
            memory_mib: int,
            disk_size_gb: num,
            working_dir: str,
            env: { type: 'array', items: obj({ key: str, value: str }, ['key', 'value']) },
            volumes: {
              type: 'array',
              items: obj({ managed_volume: str, guest_path: str, read_only: { const: false } }, [
                'managed_volume',
                'guest_path',
              ]),
              description: 'managed volumes only; host_path is refused',
            },
            network: obj(
              { mode: { enum: ['enabled', 'disabled'] }, allow_net: { type: 'array', items: str } },
              ['mode'],
            ),
            secrets: {
              type: 'array',
              items: obj({ name: str, value: str, hosts: { type: 'array', items: str }, placeholder: str }, [
                'name',
                'value',
              ]),
            },
            advanced: obj({
              capabilities: obj({ add: { type: 'array', items: str }, drop: { type: 'array', items: str } }),
            }),
            auto_remove: bool,
            detach: bool,
            isolation: { enum: ['container', 'gvisor'], description: 'isolation tier; default container' },
            auto_pause: { ...num, exclusiveMinimum: 0, description: 'pause after this many idle seconds' },
            auto_delete: { ...num, minimum: 0, description: 'remove this many seconds after stop' },
            auto_resume: { ...bool, description: 'a command on a paused box resumes it first' },
            timeout_ms: { ...num, exclusiveMinimum: 0, description: 'on_timeout ms after creation' },
            on_timeout: { enum: ['stop', 'pause', 'remove'], description: 'timeout action; default stop' },
            entrypoint: {
              type: 'array',
              items: str,
              description:
                "replaces the image's ENTRYPOINT; with cmd, the box's main process (entrypoint + cmd)",
            },
            cmd: { type: 'array', items: str, description: "replaces the image's CMD" },
            user: {
              type: 'string',
              description: 'name|uid[:group|gid] of the main process and default of exec',
            },
            health_check: obj({
              interval: { type: 'number', minimum: 0.5, description: 'seconds between checks; default 30' },
              timeout: { type: 'number', minimum: 0.1, description: 'seconds a check may take; default 30' },
              retries: {
                type: 'integer',
                minimum: 1,
                description: 'consecutive failures to unhealthy; default 3',
              },
              start_period: {
                type: 'number',
                minimum: 0,
                description: 'seconds failures do not count; default 0',
              },
              command: {
                type: 'array',
                items: str,
                description:
                  "exec form, ['CMD', …] or ['CMD-SHELL', script]; default the image's HEALTHCHECK, else a probe",
              },
            }),
          },
          ['image'],
        ),
        BoxInfo: obj(
          {
            id: str,
            name: str,
            state: obj(
              {
                status: { enum: ['configured', 'running', 'paused', 'stopped', 'failed'] },
                running: bool,
                pid: int,
              },
              ['status', 'running'],
            ),
            created_at: { type: 'string', format: 'date-time' },
            started_at: { type: 'string', format: 'date-time' },
            image: str,
            cpus: num,
            memory_mib: int,
            network: {
              oneOf: [
                { type: 'null' },
                obj({
                  outbound: obj({ mode: str, allow_net: { type: 'array', items: str } }),
                  inbound: obj({ mode: str, allow_net: { type: 'array', items: str } }),
                  published_ports: {
                    oneOf: [
                      { type: 'null' },
                      {
                        type: 'array',
                        items: obj({ guest_port: int, host_ip: str, host_port: int, protocol: str }),
                      },
                    ],
                  },
                  mode: str,
                  allow_net: { type: 'array', items: str },
                }),
              ],
            },
            isolation: obj(
              { tier: { enum: ['container', 'gvisor'] }, platform: { enum: ['ptrace', 'kvm'] } },
              ['tier'],
            ),
            health_status: obj(
              {
                state: { enum: ['none', 'starting', 'healthy', 'unhealthy'] },
                failures: int,
                last_check: { type: 'string', format: 'date-time' },
              },
              ['state', 'failures'],
            ),
          },
          ['id', 'state', 'created_at', 'image', 'cpus', 'memory_mib', 'network'],
        ),
        RuntimeMetrics: obj({
          boxes_created_total: int,
          boxes_failed_total: int,
          num_running_boxes: int,
          total_commands_executed: int,
          total_exec_errors: int,
        }),
        BoxMetrics: obj({
          commands_executed_total: int,
          exec_errors_total: int,
          bytes_sent_total: int,
          bytes_received_total: int,
          cpu_percent: num,
          memory_bytes: int,
          network_bytes_sent: int,
          network_bytes_received: int,
          total_create_duration_ms: num,
          stage_image_prepare_ms: num,
          stage_filesystem_setup_ms: num,
          stage_box_config_ms: num,
          stage_box_spawn_ms: num,
          stage_container_init_ms: num,
        }),
        ExecRequest: obj(
          {
            cmd: str,
            args: { type: 'array', items: str },
            env: { type: 'array', items: obj({ key: str, value: str }) },
            tty: bool,
            cwd: str,
            user: str,
          },
          ['cmd'],
        ),
        ExecutionStatus: obj(
          {
            id: str,
            box_id: str,
            status: { enum: ['running', 'exited'] },
            exit_code: { type: ['integer', 'null'] },
            attached: bool,
          },
          ['id', 'box_id', 'status'],
        ),
        Volume: obj(
          {
            id: str,
            name: { type: ['string', 'null'] },
            created_at: { type: 'string', format: 'date-time' },
          },
          ['id', 'created_at'],
        ),
        Tunnel: obj({
          id: str,
          box_id: str,
          port: int,
          connect_path: str,
          expires_at: { type: 'string', format: 'date-time' },
        }),
      },
    },
    paths: {
      '/v1/openapi.json': {
        get: { summary: 'this document', responses: { '200': { description: 'OpenAPI 3.1' } } },
      },
      '/v1/config': {
        get: op('server configuration and features', 'sandbox.boxes.read', {
          '200': { description: 'config' },
        }),
      },
      '/v1/metrics': {
        get: op('runtime metrics', 'sandbox.boxes.read', {
          '200': { description: 'metrics', ...json(ref('RuntimeMetrics')) },
        }),
      },
      '/metrics': {
        get: op(
          'Prometheus metrics in the text exposition format (requests by route and status, running boxes, boxes created and failed, executions by outcome)',
          'sandbox.boxes.read',
          { '200': { description: 'text/plain; version=0.0.4', content: { 'text/plain': { schema: str } } } },
        ),
      },
      '/v1/boxes': {
        get: op('list boxes', 'sandbox.boxes.read', {
          '200': { description: 'boxes', ...json({ type: 'array', items: ref('BoxInfo') }) },
        }),
        post: op(
          'create and start a box',
          'sandbox.boxes.write',
          { '201': { description: 'created', ...json(ref('BoxInfo')) } },
          { requestBody: { required: true, ...json(ref('BoxOptions')) } },
        ),
      },
      '/v1/boxes/{box}': {
        parameters: [boxParam],
        get: op('box metadata', 'sandbox.boxes.read', {
          '200': { description: 'box', ...json(ref('BoxInfo')) },
        }),
        delete: op(
          'remove a box (force: kill a running box)',
          'sandbox.boxes.write',
          { '204': { description: 'removed' } },
          { parameters: [{ name: 'force', in: 'query', schema: { enum: ['true', 'false'] } }] },
        ),
      },
      '/v1/boxes/{box}/start': {
        parameters: [boxParam],
        post: op(
          'start a stopped box again (writable layer and volumes kept); a running box is left as is',
          'sandbox.boxes.write',
          {
            '200': { description: 'box', ...json(ref('BoxInfo')) },
          },
        ),
      },
      '/v1/boxes/{box}/stop': {
        parameters: [boxParam],
        post: op(
          'stop the box (auto_remove boxes are removed: 204)',
          'sandbox.boxes.write',
          {
            '200': { description: 'box', ...json(ref('BoxInfo')) },
            '204': { description: 'stopped and removed' },
          },
          {
            parameters: [
              {
                name: 'timeout',
                in: 'query',
                description:
                  'seconds the commands get after SIGTERM before SIGKILL (default: the engine grace, 2 s)',
                schema: num,
              },
            ],
          },
        ),
      },
      '/v1/boxes/{box}/pause': {
        parameters: [boxParam],
        post: op(
          'pause the box: its processes are frozen (cgroup freezer) and use no CPU; a paused box is left as is',
          'sandbox.boxes.write',
          { '204': { description: 'paused' } },
        ),
      },
      '/v1/boxes/{box}/resume': {
        parameters: [boxParam],
        post: op('resume a paused box; a running box is left as is', 'sandbox.boxes.write', {
          '204': { description: 'running' },
        }),
      },
      '/v1/boxes/{box}/timeout': {
        parameters: [boxParam],
        post: op(
          "set the box's timeout: on_timeout (default the box's own, else stop) happens timeout_ms from now",
          'sandbox.boxes.write',
          { '204': { description: 'set' } },
          {
            requestBody: {
              required: true,
              ...json(
                obj(
                  {
                    timeout_ms: { ...num, exclusiveMinimum: 0 },
                    on_timeout: { enum: ['stop', 'pause', 'remove'] },
                  },
                  ['timeout_ms'],
                ),
              ),
            },
          },
        ),
      },
      '/v1/boxes/{box}/files/content': {
        parameters: [boxParam, pathQuery],
        get: op('read a regular file (bytes, streamed; symlinks followed inside the box)', 'sandbox.exec', {
          '200': {
            description: 'file bytes',
            content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
          },
        }),
        put: op(
          'write a file atomically (parents created; owner and mode of an existing file kept)',
          'sandbox.exec',
          { '201': { description: 'written', ...json(ref('WriteInfo')) } },
          {
            parameters: [
              {
                name: 'mode',
                in: 'query',
                description: 'mode of a new file, decimal (default 420 = 0o644)',
                schema: int,
              },
            ],
            requestBody: {
              required: true,
              content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
            },
          },
        ),
      },
      '/v1/boxes/{box}/files': {
        parameters: [boxParam, pathQuery],
        get: op(
          'list a directory',
          'sandbox.exec',
          { '200': { description: 'entries', ...json({ type: 'array', items: ref('EntryInfo') }) } },
          {
            parameters: [
              { name: 'depth', in: 'query', description: 'levels, 1-64 (default 1)', schema: int },
            ],
          },
        ),
        delete: op('remove a file, symlink or directory tree', 'sandbox.exec', {
          '204': { description: 'removed' },
        }),
      },
      '/v1/boxes/{box}/files/stat': {
        parameters: [boxParam, pathQuery],
        get: op('the entry (a final symlink is not followed)', 'sandbox.exec', {
          '200': { description: 'entry', ...json(ref('EntryInfo')) },
        }),
      },
      '/v1/boxes/{box}/files/mkdir': {
        parameters: [boxParam],
        post: op(
          'make a directory and its parents',
          'sandbox.exec',
          {
            '200': {
              description: 'created is false when it existed',
              ...json(obj({ created: bool }, ['created'])),
            },
          },
          { requestBody: { required: true, ...json(obj({ path: str }, ['path'])) } },
        ),
      },
      '/v1/boxes/{box}/files/rename': {
        parameters: [boxParam],
        post: op(
          'rename (move) an entry',
          'sandbox.exec',
          { '200': { description: 'the entry at its new path', ...json(ref('EntryInfo')) } },
          { requestBody: { required: true, ...json(obj({ from: str, to: str }, ['from', 'to'])) } },
        ),
      },
      '/v1/boxes/{box}/files/symlink': {
        parameters: [boxParam],
        post: op(
          'make a symbolic link (used by copyIn)',
          'sandbox.exec',
          { '204': { description: 'made' } },
          { requestBody: { required: true, ...json(obj({ path: str, target: str }, ['path', 'target'])) } },
        ),
      },
      '/v1/boxes/{box}/files/watch': {
        parameters: [boxParam, pathQuery],
        get: op(
          'watch a directory (inotify): newline-delimited JSON, first {"type":"ready"}, then {"name","type"} per event (create, write, remove); ends when the client disconnects',
          'sandbox.exec',
          { '200': { description: 'event stream', content: { 'application/x-ndjson': { schema: str } } } },
          {
            parameters: [
              { name: 'recursive', in: 'query', schema: { type: 'string', enum: ['true', 'false'] } },
            ],
          },
        ),
      },
      '/v1/boxes/{box}/metrics': {
        parameters: [boxParam],
        get: op('box metrics', 'sandbox.boxes.read', {
          '200': { description: 'metrics', ...json(ref('BoxMetrics')) },
        }),
      },
      '/v1/boxes/{box}/executions': {
        parameters: [boxParam],
        post: op(
          'start a command',
          'sandbox.exec',
          { '201': { description: 'started', ...json(execution) } },
          { requestBody: { required: true, ...json(ref('ExecRequest')) } },
        ),
      },
      '/v1/boxes/{box}/executions/attach': {
        parameters: [boxParam],
        get: op(
          'WebSocket: start and attach in one round trip — first client frame {"type":"start", cmd, args?, env?, tty?, cwd?, user?}, answered by {"type":"started","id"} (or {"type":"error","error"}), then the attach stream',
          'sandbox.exec',
          { '101': { description: 'switching protocols' } },
        ),
      },
      '/v1/executions/stream': {
        get: op(
          'WebSocket: multiplexed exec stream — many executions in any boxes over one connection (see the description); an execution attached here counts as attached (409 for a second client), and is reattached with …/{execution}/attach?offset=N when the connection drops',
          'sandbox.exec',
          { '101': { description: 'switching protocols' } },
        ),
      },
      '/v1/boxes/{box}/executions/{execution}': {
        parameters: [boxParam, execParam],
        get: op('execution status', 'sandbox.exec', { '200': { description: 'status', ...json(execution) } }),
      },
      '/v1/boxes/{box}/executions/{execution}/kill': {
        parameters: [boxParam, execParam],
        post: op('SIGKILL the command', 'sandbox.exec', {
          '200': { description: 'status', ...json(execution) },
        }),
      },
      '/v1/boxes/{box}/executions/{execution}/signal': {
        parameters: [boxParam, execParam],
        post: op(
          'send a signal',
          'sandbox.exec',
          { '200': { description: 'status', ...json(execution) } },
          { requestBody: { required: true, ...json(obj({ signal: str }, ['signal'])) } },
        ),
      },
      '/v1/boxes/{box}/executions/{execution}/resize': {
        parameters: [boxParam, execParam],
        post: op(
          'resize the terminal (tty)',
          'sandbox.exec',
          { '200': { description: 'status', ...json(execution) } },
          { requestBody: { required: true, ...json(obj({ cols: int, rows: int }, ['cols', 'rows'])) } },
        ),
      },
      '/v1/boxes/{box}/executions/{execution}/attach': {
        parameters: [
          boxParam,
          execParam,
          {
            name: 'offset',
            in: 'query',
            schema: { type: 'integer', minimum: 0 },
            description: 'resume after this many output bytes',
          },
        ],
        get: op('WebSocket exec stream (see the description)', 'sandbox.exec', {
          '101': { description: 'switching protocols' },
          '426': { description: 'not a WebSocket request' },
        }),
      },
      '/v1/boxes/{box}/tunnels': {
        parameters: [boxParam],
        post: op(
          'prepare a one-shot tunnel to a box TCP port; then CONNECT /v1/tunnels/{id}',
          'sandbox.exec',
          { '201': { description: 'prepared', ...json(ref('Tunnel')) } },
          { requestBody: { required: true, ...json(obj({ port: int }, ['port'])) } },
        ),
      },
      '/v1/images/pull': {
        post: op(
          'pull an image into the server store (BoxLite images.pull)',
          'sandbox.boxes.write',
          {
            '200': {
              description: 'pulled (or already stored)',
              ...json(
                obj(
                  {
                    reference: str,
                    config_digest: str,
                    layer_count: int,
                    digest: str,
                    resolved_reference: str,
                  },
                  ['reference', 'config_digest', 'layer_count'],
                ),
              ),
            },
            '422': { description: 'the image cannot be pulled (code image)', ...json(ref('Error')) },
          },
          { requestBody: { required: true, ...json(obj({ reference: str }, ['reference'])) } },
        ),
      },
      '/v1/images': {
        get: op('stored images (BoxLite images.list)', 'sandbox.boxes.read', {
          '200': {
            description: 'images',
            ...json({
              type: 'array',
              items: obj({
                reference: str,
                repository: str,
                tag: { type: ['string', 'null'] },
                id: str,
                digest: str,
                size_bytes: int,
                pulled_at: { type: 'string', format: 'date-time' },
                cached_at: { type: 'string', format: 'date-time' },
              }),
            }),
          },
        }),
        delete: op(
          'remove an image reference (409 while a box uses it)',
          'sandbox.boxes.write',
          { '204': { description: 'removed' } },
          {
            parameters: [
              { name: 'reference', in: 'query', required: true, description: 'image reference', schema: str },
            ],
          },
        ),
      },
      '/v1/volumes': {
        get: op('list managed volumes', 'sandbox.boxes.read', {
          '200': { description: 'volumes', ...json({ type: 'array', items: ref('Volume') }) },
        }),
        post: op(
          'create a managed volume',
          'sandbox.boxes.write',
          { '201': { description: 'created', ...json(ref('Volume')) } },
          { requestBody: json(obj({ name: str })) },
        ),
      },
      '/v1/volumes/{volume}': {
        parameters: [volumeParam],
        get: op('volume', 'sandbox.boxes.read', { '200': { description: 'volume', ...json(ref('Volume')) } }),
        delete: op('delete a volume (409 while mounted)', 'sandbox.boxes.write', {
          '204': { description: 'deleted' },
        }),
      },
    },
  };
}
