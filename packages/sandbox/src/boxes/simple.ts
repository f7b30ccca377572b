/**
 * `SimpleBox` (spec 002 "SimpleBox"): a box started lazily on first use, with run-and-wait `exec`.
 * It is the base class of the other wrapper boxes (`CodeBox`, and later `BrowserBox`, `ComputerBox`,
 * `InteractiveBox`): subclasses pass their own defaults to the constructor and use `ensureStarted()`,
 * `runCommand()` and `box` to build their operations.
 */
import { BoxError, TimeoutError } from '../errors.ts';
import { JsRuntime } from '../js-runtime.ts';
import type { JsBox } from '../runtime/box.ts';
import { BoxFiles, backendOf } from '../runtime/files/files.ts';
import { ForwardedFiles } from '../runtime/files/forward.ts';
import type { CopyOptions } from '../runtime/files/types.ts';
import { rejectLegacyShapes } from '../runtime/options.ts';
import type {
  AdvancedBoxOptions,
  ExecResult,
  JsBoxInfo,
  JsBoxMetrics,
  JsBoxOptions,
  JsHealthCheckOptions,
  JsNetworkHandle,
  JsPortSpec,
  JsVolumeSpec,
  NetworkSpec,
  Secret,
} from '../types.ts';

/** Options of `SimpleBox` and the boxes derived from it (spec 002 "SimpleBox" constructor options). */
export interface SimpleBoxOptions {
  /** OCI image; default `python:slim` (unless `rootfsPath` is given). */
  image?: string;
  /** Prepared rootfs directory instead of an image (spec 002 `JsBoxOptions.rootfsPath`). */
  rootfsPath?: string;
  /** Size-limited writable layer in GB (spec 002 `JsBoxOptions.diskSizeGb`). */
  diskSizeGb?: number;
  /**
   * With `name`: use the existing box of that name instead of failing on the taken name (BoxLite
   * `reuseExisting`; `created` then tells which happened). Default false.
   */
  reuseExisting?: boolean;
  /** Memory in MiB; default 512. */
  memoryMib?: number;
  /** CPU cores; default 1. */
  cpus?: number;
  /** Runtime to create the box in; default `JsRuntime.withDefaultConfig()`. */
  runtime?: JsRuntime;
  /** Unique box name. */
  name?: string;
  /** Remove the box when it stops; default true. */
  autoRemove?: boolean;
  /** The box survives the exit of this process; default false. */
  detach?: boolean;
  /** Working directory in the box; default `/root`. */
  workingDir?: string;
  /** Environment variables of the box. */
  env?: Record<string, string>;
  volumes?: JsVolumeSpec[];
  network?: NetworkSpec;
  ports?: JsPortSpec[];
  secrets?: Secret[];
  advanced?: AdvancedBoxOptions;
  /** Replaces the image's ENTRYPOINT; with `cmd`, the box's main process (`JsBoxOptions.entrypoint`). */
  entrypoint?: string[];
  /** Replaces the image's CMD (`JsBoxOptions.cmd`). */
  cmd?: string[];
  /** User of the main process and default user of `exec` (`JsBoxOptions.user`). */
  user?: string;
  /** Periodic health check, seconds (`JsBoxOptions.healthCheck`); status in `info().healthStatus`. */
  healthCheck?: JsHealthCheckOptions;
}

/** Per-command options of `SimpleBox.exec` (array form). */
export interface ExecCommandOptions {
  /** Working directory of the command (absolute path). */
  cwd?: string;
  /** User to run as: `uid[:gid]` or a name known in the image. */
  user?: string;
  /** Kill the command and throw `TimeoutError` after this many seconds. */
  timeoutSecs?: number;
}

/** Defaults a subclass gives its boxes (spec 002: SimpleBox/CodeBox `python:slim`, ComputerBox 2 CPUs…). */
export interface BoxDefaults {
  image: string;
  cpus?: number;
  memoryMib?: number;
}

/** Default image of `SimpleBox` and `CodeBox` (spec 002). */
export const SIMPLEBOX_DEFAULT_IMAGE = 'python:slim';

/** Quotes a command line for messages (`ExecError.command`): words with spaces or quotes are single-quoted. */
export function formatCommand(cmd: string, args: string[]): string {
  return [cmd, ...args]
    .map((word) => (/^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`))
    .join(' ');
}

/** A box started on first use that runs commands to completion (spec 002 `SimpleBox`). */
export class SimpleBox {
  /** The runtime the box lives in. */
  protected readonly runtime: JsRuntime;
  /** Options given to the constructor. */
  protected readonly options: SimpleBoxOptions;
  /** Defaults of this box type. */
  protected readonly defaults: BoxDefaults;
  #files: BoxFiles | null = null;
  #created: boolean | undefined = undefined;
  #box: JsBox | null = null;
  #starting: Promise<JsBox> | null = null;

  /**
   * @param options spec 002 SimpleBox options; nothing is created until the first operation.
   * @param defaults defaults of a subclass (image, cpus, memoryMib).
   * @throws TypeError (`OptionTypeError`, code `invalid_option`) naming `network` given as a string or a
   *   top-level `allowNet`, as BoxLite does at construction; BoxError naming `options`, `runtime` or
   *   `reuseExisting`. Other options are checked when the box is started.
   */
  constructor(options: SimpleBoxOptions = {}, defaults: BoxDefaults = { image: SIMPLEBOX_DEFAULT_IMAGE }) {
    if (options === null || typeof options !== 'object') {
      throw new BoxError('box options must be an object', { field: 'options' });
    }
    rejectLegacyShapes(options as Record<string, unknown>);
    if (options.runtime !== undefined && !(options.runtime instanceof JsRuntime)) {
      throw new BoxError('invalid box option runtime: must be a JsRuntime', { field: 'runtime' });
    }
    if (options.reuseExisting !== undefined && typeof options.reuseExisting !== 'boolean') {
      throw new BoxError('invalid box option reuseExisting: must be a boolean', { field: 'reuseExisting' });
    }
    if (options.reuseExisting === true && options.name === undefined) {
      throw new BoxError('invalid box option reuseExisting: needs a name (the box to reuse)', {
        field: 'reuseExisting',
      });
    }
    this.options = options;
    this.defaults = defaults;
    this.runtime = options.runtime ?? JsRuntime.withDefaultConfig();
  }

  /** Box id (ULID). @throws BoxError when the box has not been started yet (use `getId()`). */
  get id(): string {
    if (!this.#box)
      throw new BoxError('the box is not started yet; call getId() or run a command first', {
        code: 'conflict',
      });
    return this.#box.id;
  }

  /** Tunnels and preview URLs of box ports (spec 002 `box.network`); the box is started on the first call. */
  get network(): JsNetworkHandle {
    return {
      tunnel: async (port) => (await this.ensureStarted()).network.tunnel(port),
      previewUrl: async (port, options) => (await this.ensureStarted()).network.previewUrl(port, options),
      update: async (policy) => (await this.ensureStarted()).network.update(policy),
    };
  }

  /**
   * The box's files (`box.files`: read, write, list, stat, exists, makeDir, remove, rename, watchDir); the
   * box is started on the first call.
   */
  get files(): BoxFiles {
    this.#files ??= new BoxFiles(
      new ForwardedFiles(async () => backendOf((await this.ensureStarted()).files)),
    );
    return this.#files;
  }

  /** BoxLite `copyIn`: a host file or directory into the box (see `JsBox.copyIn`); starts the box. */
  async copyIn(hostPath: string, guestPath: string, options?: CopyOptions): Promise<void> {
    return (await this.ensureStarted()).copyIn(hostPath, guestPath, options);
  }

  /** BoxLite `copyOut`: a file or directory of the box to the host (see `JsBox.copyOut`); starts the box. */
  async copyOut(guestPath: string, hostPath: string, options?: CopyOptions): Promise<void> {
    return (await this.ensureStarted()).copyOut(guestPath, hostPath, options);
  }

  /**
   * Whether starting this wrapper created its box (true) or reused an existing one (`reuseExisting`;
   * false); undefined before the box is started.
   */
  get created(): boolean | undefined {
    return this.#created;
  }

  /** Metadata of the box (BoxLite `SimpleBox.info()`; same as `getInfo()`); starts the box. */
  info(): Promise<JsBoxInfo> {
    return this.getInfo();
  }

  /** Box metrics (spec 002 `JsBoxMetrics`); starts the box. */
  async metrics(): Promise<JsBoxMetrics> {
    return (await this.ensureStarted()).metrics();
  }

  /** Box name given in the options. */
  get name(): string | undefined {
    return this.options.name;
  }

  /** The underlying box handle, or null before the box is started. */
  protected get box(): JsBox | null {
    return this.#box;
  }

  /** `JsBoxOptions` of this box: the constructor options over the type's defaults. */
  protected boxOptions(): JsBoxOptions {
    const o = this.options;
    const result: JsBoxOptions = {
      autoRemove: o.autoRemove ?? true,
      detach: o.detach ?? false,
    };
    if (o.rootfsPath !== undefined) result.rootfsPath = o.rootfsPath;
    if (o.image !== undefined || o.rootfsPath === undefined) result.image = o.image ?? this.defaults.image;
    if (o.diskSizeGb !== undefined) result.diskSizeGb = o.diskSizeGb;
    const cpus = o.cpus ?? this.defaults.cpus;
    const memoryMib = o.memoryMib ?? this.defaults.memoryMib;
    if (cpus !== undefined) result.cpus = cpus;
    if (memoryMib !== undefined) result.memoryMib = memoryMib;
    if (o.workingDir !== undefined) result.workingDir = o.workingDir;
    if (o.env !== undefined) {
      if (o.env === null || typeof o.env !== 'object' || Array.isArray(o.env)) {
        throw new BoxError('invalid box option env: must be an object of strings', { field: 'env' });
      }
      result.env = Object.entries(o.env).map(([key, value]) => ({ key, value }));
    }
    if (o.volumes !== undefined) result.volumes = o.volumes;
    if (o.network !== undefined) result.network = o.network;
    if (o.ports !== undefined) result.ports = o.ports;
    if (o.secrets !== undefined) result.secrets = o.secrets;
    if (o.advanced !== undefined) result.advanced = o.advanced;
    if (o.entrypoint !== undefined) result.entrypoint = o.entrypoint;
    if (o.cmd !== undefined) result.cmd = o.cmd;
    if (o.user !== undefined) result.user = o.user;
    if (o.healthCheck !== undefined) result.healthCheck = o.healthCheck;
    return result;
  }

  /** Creates the box on first call (concurrent callers share one creation); returns its handle. */
  protected ensureStarted(): Promise<JsBox> {
    if (this.#box) return Promise.resolve(this.#box);
    this.#starting ??= (async () => {
      try {
        if (this.options.reuseExisting === true) {
          const { box, created } = await this.runtime.getOrCreate(this.boxOptions(), this.options.name);
          if (!created) await box.start(); // a stopped box of that name is started again
          this.#box = box;
          this.#created = created;
        } else {
          this.#box = await this.runtime.create(this.boxOptions(), this.options.name);
          this.#created = true;
        }
        return this.#box;
      } finally {
        this.#starting = null;
      }
    })();
    return this.#starting;
  }

  /** Starts the box if needed and returns its id. */
  async getId(): Promise<string> {
    return (await this.ensureStarted()).id;
  }

  /** Starts the box if needed and returns its metadata (spec 002 `JsBoxInfo`). */
  async getInfo(): Promise<JsBoxInfo> {
    return (await this.ensureStarted()).info();
  }

  /**
   * Runs a command to completion and returns its exit code and whole output (spec 002 `SimpleBox.exec`).
   * Variadic form `exec('ls', '-l', '/')`, where a trailing object is the environment as in BoxLite
   * (`exec('sh', '-c', 'echo $X', { X: '1' })`); array form `exec('ls', ['-l'], { K: 'v' }, { cwd, user,
   * timeoutSecs })`. A non-zero exit code is returned, not thrown.
   * @throws TimeoutError when `timeoutSecs` passes (the command is killed); BoxError when it cannot start.
   */
  exec(cmd: string, ...args: string[]): Promise<ExecResult>;
  exec(cmd: string, ...argsThenEnv: [...string[], Record<string, string>]): Promise<ExecResult>;
  exec(
    cmd: string,
    args: string[],
    env?: Record<string, string>,
    options?: ExecCommandOptions,
  ): Promise<ExecResult>;
  exec(cmd: string, ...rest: unknown[]): Promise<ExecResult> {
    if (Array.isArray(rest[0])) {
      return this.runCommand(
        cmd,
        rest[0] as string[],
        rest[1] as Record<string, string> | undefined,
        (rest[2] as ExecCommandOptions | undefined) ?? {},
      );
    }
    const last = rest.at(-1);
    if (last !== null && typeof last === 'object' && !Array.isArray(last)) {
      return this.runCommand(cmd, rest.slice(0, -1) as string[], last as Record<string, string>, {});
    }
    return this.runCommand(cmd, rest as string[], undefined, {});
  }

  /** Runs a command to completion (the body of `exec`), for subclasses. Same errors as `exec`. */
  protected async runCommand(
    cmd: string,
    args: string[],
    env: Record<string, string> | undefined,
    options: ExecCommandOptions,
  ): Promise<ExecResult> {
    if (options === null || typeof options !== 'object') {
      throw new BoxError('invalid exec options: must be an object { cwd?, user?, timeoutSecs? }', {
        field: 'options',
      });
    }
    const { timeoutSecs } = options;
    if (timeoutSecs !== undefined && (typeof timeoutSecs !== 'number' || !(timeoutSecs > 0))) {
      throw new BoxError('invalid exec option timeoutSecs: must be a positive number of seconds', {
        field: 'timeoutSecs',
      });
    }
    if (options.user !== undefined && (typeof options.user !== 'string' || options.user === '')) {
      throw new BoxError('invalid exec option user: must be a non-empty string', { field: 'user' });
    }
    const box = await this.ensureStarted();
    const execOptions: { cwd?: string; user?: string } = {};
    if (options.cwd !== undefined) execOptions.cwd = options.cwd;
    if (options.user !== undefined) execOptions.user = options.user;
    const execution = await box.execWith(cmd, args, env, execOptions);
    const { stdout, stderr, stdin } = execution.collect();
    await stdin.close();
    let timer: NodeJS.Timeout | undefined;
    let timedOut = false;
    if (timeoutSecs !== undefined) {
      timer = setTimeout(() => {
        timedOut = true;
        execution.kill().catch(() => {});
      }, timeoutSecs * 1000);
    }
    try {
      const { exitCode } = await execution.wait();
      if (timedOut) {
        throw new TimeoutError(
          `command '${formatCommand(cmd, args)}' exceeded timeoutSecs=${timeoutSecs} and was killed`,
        );
      }
      return { exitCode, stdout: await stdout.text(), stderr: await stderr.text() };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops the box (and removes it when `autoRemove`, the default). A box never started is left alone. */
  async stop(): Promise<void> {
    if (this.#starting) await this.#starting.catch(() => {});
    const box = this.#box;
    if (!box) return;
    const info = await box.info().catch(() => null);
    if (info === null) return;
    await box.stop();
  }

  /** `await using box = new SimpleBox()` stops the box at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
