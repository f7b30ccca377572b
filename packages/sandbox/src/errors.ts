/**
 * Error hierarchy of the sandbox SDK (spec 002, "Errors"): `BoxError` is the base; `ExecError`,
 * `TimeoutError` and `ParseError` derive from it.
 */

/** Options of a `BoxError`: the standard `cause`, plus the offending option field when there is one. */
export interface BoxErrorOptions extends ErrorOptions {
  /** Path of the rejected option, e.g. `volumes[0].readOnly` or `ports[1].protocol`. */
  field?: string;
}

/**
 * Any SDK error (spec 002 "Errors": base class). `message` says what failed and, where known, which field
 * or image. `field` is set when a caller-supplied option was rejected (a client mistake: HTTP 400 over REST).
 */
export class BoxError extends Error {
  /** Path of the rejected option (`volumes[0].hostPath`), when the error is about one. */
  readonly field?: string;
  /** @param message human-readable description naming the offending field, image or box. */
  constructor(message: string, options?: BoxErrorOptions) {
    super(message, options);
    this.name = 'BoxError';
    if (options?.field !== undefined) this.field = options.field;
  }
}

/**
 * A command failed with a non-zero exit code (spec 002 "Errors").
 * `command` is the command line as run, `exitCode` its exit status, `stderr` what it wrote to stderr.
 */
export class ExecError extends BoxError {
  readonly command: string;
  readonly exitCode: number;
  readonly stderr: string;
  constructor(command: string, exitCode: number, stderr: string) {
    super(
      `command '${command}' exited with code ${exitCode}${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`,
    );
    this.name = 'ExecError';
    this.command = command;
    this.exitCode = exitCode;
    this.stderr = stderr;
  }
}

/** An operation exceeded its time limit, for example `waitUntilReady` (spec 002 "Errors"). */
export class TimeoutError extends BoxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TimeoutError';
  }
}

/** Command output could not be parsed, for example a cursor position (spec 002 "Errors"). */
export class ParseError extends BoxError {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'ParseError';
  }
}
