/**
 * The stateful code interpreter of boxes (E2B's code interpreter): contexts that are
 * live Jupyter kernels in the box, executions with E2B-shaped results and events, and the NDJSON wire form
 * of E2B's `/execute` stream. The functions take a box (a `JsBox` of a local runtime fits) and share one
 * `JupyterInterpreter` per box id in this process, dropped when the box's Jupyter Server ends. The image
 * needs python3 with Jupyter Server and ipykernel (the offline `python:slim` and `code-interpreter-v1`).
 */
import { JupyterInterpreter } from './jupyter.ts';
import type {
  CodeContext,
  CodeInterpreter,
  CreateContextOptions,
  ExecuteOptions,
  Execution,
  InterpreterBox,
  InterpreterLimits,
} from './types.ts';

export { decodeEvent, ExecutionCollector, encodeEvent, resultFromBundle } from './events.ts';
export { DEFAULT_EXECUTION_TIMEOUT_MS, INTERRUPT_GRACE_MS, JupyterInterpreter } from './jupyter.ts';
export { JUPYTER_PORT } from './server.ts';
export type * from './types.ts';

/** The interpreters of this process, by box id. */
const interpreters = new Map<string, JupyterInterpreter>();

/**
 * The interpreter of `box` in this process (created on first use; `limits` apply to a new one only). It
 * is forgotten when the box's Jupyter Server ends (the box stopped), so a later call starts afresh.
 */
export function interpreterFor(box: InterpreterBox, limits?: InterpreterLimits): CodeInterpreter {
  let found = interpreters.get(box.id);
  if (!found) {
    const created = new JupyterInterpreter(box, limits, () => {
      if (interpreters.get(box.id) === created) interpreters.delete(box.id);
    });
    interpreters.set(box.id, created);
    found = created;
  }
  return found;
}

/** Closes and forgets the interpreter of the box with id `boxId` (its kernels end with the box). */
export async function closeInterpreter(boxId: string): Promise<void> {
  const found = interpreters.get(boxId);
  interpreters.delete(boxId);
  await found?.close();
}

/** Starts a context (kernel) in `box` (E2B `POST /contexts`). See `CodeInterpreter.createContext`. */
export function createContext(box: InterpreterBox, options?: CreateContextOptions): Promise<CodeContext> {
  return interpreterFor(box).createContext(options);
}

/** The live contexts of `box` (E2B `GET /contexts`). */
export function listContexts(box: InterpreterBox): Promise<CodeContext[]> {
  return interpreterFor(box).listContexts();
}

/** Restarts a context's kernel (E2B `POST /contexts/{id}/restart`). @throws BoxError `not_found`. */
export function restartContext(box: InterpreterBox, context: string | CodeContext): Promise<void> {
  return interpreterFor(box).restartContext(context);
}

/** Shuts a context down (E2B `DELETE /contexts/{id}`). @throws BoxError `not_found`. */
export function removeContext(box: InterpreterBox, context: string | CodeContext): Promise<void> {
  return interpreterFor(box).removeContext(context);
}

/**
 * Runs `code` in a context of `box` (E2B `POST /execute`): callbacks and `onEvent` as events come, the
 * whole `Execution` at the end. See `CodeInterpreter.execute`.
 */
export function execute(box: InterpreterBox, code: string, options?: ExecuteOptions): Promise<Execution> {
  return interpreterFor(box).execute(code, options);
}
