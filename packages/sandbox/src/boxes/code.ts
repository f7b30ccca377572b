/**
 * `CodeBox` (spec 002 "CodeBox"): a `SimpleBox` (default image `python:slim`) that runs Python code and
 * installs packages with pip; `runCode` runs code in stateful contexts (Jupyter kernels in the box, E2B's
 * `Sandbox.runCode` shape; `src/interpreter/`), on the local and the REST runtime alike.
 */
import { readFile } from 'node:fs/promises';
import { BoxError, ExecError } from '../errors.ts';
import { closeInterpreter } from '../interpreter/index.ts';
import type { CodeContext, CreateContextOptions, ExecuteOptions, Execution } from '../interpreter/types.ts';
import {
  type BoxDefaults,
  formatCommand,
  SIMPLEBOX_DEFAULT_IMAGE,
  SimpleBox,
  type SimpleBoxOptions,
} from './simple.ts';

/** Options of `CodeBox`: those of `SimpleBox` (spec 002). */
export type CodeBoxOptions = SimpleBoxOptions;

/**
 * Options of `CodeBox.runCode` (E2B `RunCodeOpts`): those of the interpreter's `execute` without `onEvent`
 * (context or language, per-execution `envVars`, `timeoutMs` default 60000 with 0 for no limit, `signal`, and
 * the `onStdout`/`onStderr`/`onResult`/`onError` callbacks).
 */
export type RunCodeOptions = Omit<ExecuteOptions, 'onEvent'>;

/** Python interpreter run in the box (Debian and the official `python` images both provide it). */
export const CODEBOX_PYTHON = 'python3';

/** A box that runs Python (spec 002 `CodeBox`). */
export class CodeBox extends SimpleBox {
  /** @param options SimpleBox options; `image` defaults to `python:slim`. */
  constructor(options: CodeBoxOptions = {}, defaults: BoxDefaults = { image: SIMPLEBOX_DEFAULT_IMAGE }) {
    super(options, defaults);
  }

  async #python(args: string[], env?: Record<string, string>): Promise<string> {
    const result = await this.runCommand(CODEBOX_PYTHON, args, env, {});
    if (result.exitCode !== 0) {
      throw new ExecError(formatCommand(CODEBOX_PYTHON, args), result.exitCode, result.stderr);
    }
    return result.stdout;
  }

  /**
   * Runs Python `code` (`python3 -c code`) and returns what it printed on stdout.
   * @throws ExecError (with the traceback in `stderr`) when the code exits non-zero.
   */
  run(code: string): Promise<string> {
    if (typeof code !== 'string')
      return Promise.reject(new BoxError('code must be a string', { field: 'code' }));
    return this.#python(['-c', code]);
  }

  /**
   * Runs `code` in a stateful context (a Jupyter kernel in the box; E2B `runCode`): `x = 1` then
   * `x += 1; x` gives the result `2`; a matplotlib figure comes back as a result with `png` (base64). The
   * callbacks are called as the kernel sends output. Resolves with `{ results, logs: { stdout, stderr },
   * error, executionCount, text }`; an exception of the code is `error` (name, value, traceback), not
   * thrown. Needs Jupyter Server and ipykernel in the image (`python:slim` has them).
   * @throws BoxError `not_found` (unknown context), `invalid_option` naming the option, `unsupported` when
   *   the image has no Jupyter Server.
   */
  async runCode(code: string, options: RunCodeOptions = {}): Promise<Execution> {
    if (typeof code !== 'string') throw new BoxError('code must be a string', { field: 'code' });
    return (await this.ensureStarted()).interpreter.execute(code, options);
  }

  /**
   * Starts a new stateful context (E2B `createCodeContext`), isolated from the others: its own kernel,
   * `cwd` (absolute, default the box's working directory) and `language` (default `python`).
   * @throws BoxError `invalid_option` (language without a kernel, bad cwd), `conflict` past 16 contexts.
   */
  async createCodeContext(options: CreateContextOptions = {}): Promise<CodeContext> {
    return (await this.ensureStarted()).interpreter.createContext(options);
  }

  /** The live contexts of the box (E2B `listCodeContexts`). */
  async listCodeContexts(): Promise<CodeContext[]> {
    return (await this.ensureStarted()).interpreter.listContexts();
  }

  /** Restarts a context's kernel: its state is gone (E2B `restartCodeContext`). @throws BoxError `not_found`. */
  async restartCodeContext(context: string | CodeContext): Promise<void> {
    return (await this.ensureStarted()).interpreter.restartContext(context);
  }

  /** Shuts a context down (E2B `removeCodeContext`). @throws BoxError `not_found`. */
  async removeCodeContext(context: string | CodeContext): Promise<void> {
    return (await this.ensureStarted()).interpreter.removeContext(context);
  }

  /** Stops the box; this process's connections to its kernels are closed first. */
  override async stop(): Promise<void> {
    const box = this.box;
    if (box) await closeInterpreter(box.id);
    await super.stop();
  }

  /**
   * Runs the Python script at `scriptPath` on the host (its text is run in the box) and returns its stdout.
   * @throws BoxError when the file cannot be read; ExecError when the script exits non-zero.
   */
  async runScript(scriptPath: string): Promise<string> {
    let code: string;
    try {
      code = await readFile(scriptPath, 'utf8');
    } catch (error) {
      throw new BoxError(`cannot read script '${scriptPath}': ${(error as Error).message}`, {
        field: 'scriptPath',
        cause: error,
      });
    }
    return this.#python(['-c', code]);
  }

  /**
   * `pip install pkg` in the box; `pkg` is anything pip accepts (a requirement such as `requests==2.32.3`, a
   * path in the box, a URL). Returns pip's stdout.
   * @throws ExecError when pip fails (e.g. the index is unreachable).
   */
  installPackage(pkg: string): Promise<string> {
    return this.installPackages(pkg);
  }

  /** `pip install` of several packages in one run. Returns pip's stdout. @throws ExecError when pip fails. */
  installPackages(...pkgs: string[]): Promise<string> {
    if (pkgs.length === 0)
      return Promise.reject(new BoxError('installPackages needs at least one package', { field: 'pkgs' }));
    for (const pkg of pkgs) {
      if (typeof pkg !== 'string' || pkg === '' || pkg.startsWith('-')) {
        return Promise.reject(
          new BoxError(`invalid package '${String(pkg)}': must be a non-empty requirement, not an option`, {
            field: 'pkg',
          }),
        );
      }
    }
    // Debian-based images mark the system Python as externally managed (PEP 668); a box is disposable.
    return this.#python(['-m', 'pip', 'install', '--no-input', '--disable-pip-version-check', ...pkgs], {
      PIP_BREAK_SYSTEM_PACKAGES: '1',
      PIP_ROOT_USER_ACTION: 'ignore',
    });
  }
}
