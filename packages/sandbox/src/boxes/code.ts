/**
 * `CodeBox` (spec 002 "CodeBox"): a `SimpleBox` (default image `python:slim`) that runs Python code and
 * installs packages with pip.
 */
import { readFile } from 'node:fs/promises';
import { BoxError, ExecError } from '../errors.ts';
import {
  type BoxDefaults,
  formatCommand,
  SIMPLEBOX_DEFAULT_IMAGE,
  SimpleBox,
  type SimpleBoxOptions,
} from './simple.ts';

/** Options of `CodeBox`: those of `SimpleBox` (spec 002). */
export type CodeBoxOptions = SimpleBoxOptions;

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
