/**
 * Port 49999 of a sandbox: E2B's code interpreter API (`@e2b/code-interpreter`) served from the host
 * over the box's Jupyter kernels (`box.interpreter`, `src/interpreter/`): `POST /execute` streams the
 * execution as NDJSON (`encodeEvent`: stdout, stderr, results, error, execution count, end of
 * execution), `POST /contexts` `{ language?, cwd? }`, `GET /contexts`, `DELETE /contexts/{id}`,
 * `POST /contexts/{id}/restart`, `GET /health`. A client that goes away interrupts its execution.
 * Errors are `{ code, message }` (unknown context 404, bad field 400).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { encodeEvent } from '../interpreter/index.ts';
import type { JsBox } from '../runtime/box.ts';
import { E2bError, e2bErrorOf, field, isString, isStringMap, objectBody } from './wire.ts';

/** The code interpreter's port in a sandbox (E2B `JUPYTER_PORT`). */
export const CODE_INTERPRETER_PORT = 49999;
/** Largest request body accepted, bytes (1 MiB of code). */
export const MAX_CODE_BODY_BYTES = 1024 * 1024;

/** The JSON body of a request, at most {@link MAX_CODE_BODY_BYTES}. @throws E2bError 400 / 413. */
async function jsonBody(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_CODE_BODY_BYTES) throw new E2bError(413, `the body exceeds ${MAX_CODE_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return objectBody(JSON.parse(text));
  } catch (error) {
    if (error instanceof E2bError) throw error;
    throw new E2bError(400, 'the body is not JSON');
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/**
 * Starts the Jupyter Server and the default Python context of `box` in the background, as E2B's code
 * interpreter does when its sandbox starts, so that the first `runCode` finds the kernel ready instead of
 * waiting seconds for it (long enough, on a loaded machine, to reach the SDK's 60 s `timeoutMs`). The
 * empty execution used for it counts no execution (IPython skips empty cells). A failure is left for
 * the first `runCode`, which tries again and reports it.
 */
export function startDefaultContext(box: JsBox): void {
  box.interpreter.execute('', { timeoutMs: 0 }).catch(() => {});
}

/** Serves one request to port 49999 of `box`. @throws E2bError, BoxError (answered by the router). */
export async function serveCodeInterpreter(
  box: JsBox,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  const interpreter = box.interpreter;
  const path = url.pathname;
  if (path === '/health' && req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/plain' }).end('OK');
    return;
  }
  if (path === '/execute' && req.method === 'POST') {
    const body = await jsonBody(req);
    const code = field(body, 'code', 'must be a string', isString);
    if (code === undefined) throw new E2bError(400, 'invalid field code: required');
    const context = field(body, 'context_id', 'must be a context id', isString);
    const language = field(body, 'language', 'must be a language name', isString);
    const envVars = field(body, 'env_vars', 'must be an object of strings', isStringMap);
    if (context !== undefined && language !== undefined) {
      throw new E2bError(400, 'give context_id or language, not both');
    }
    if (context !== undefined && !(await interpreter.listContexts()).some((c) => c.id === context)) {
      throw new E2bError(404, `context ${context} not found`);
    }
    // The answer starts at once: the first execution of a box starts its Jupyter Server and kernel, which
    // may take longer than the client's request timeout; its execution timeout covers the stream.
    const abort = new AbortController();
    res.once('close', () => abort.abort());
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.flushHeaders();
    try {
      await interpreter.execute(code, {
        ...(context !== undefined ? { context } : {}),
        ...(language !== undefined ? { language } : {}),
        ...(envVars !== undefined ? { envVars } : {}),
        timeoutMs: 0,
        signal: abort.signal,
        onEvent: (event) => void res.write(encodeEvent(event)),
      });
    } catch (error) {
      const { message } = e2bErrorOf(error);
      res.write(
        encodeEvent({ type: 'error', error: { name: 'SandboxError', value: message, traceback: '' } }),
      );
      res.write(encodeEvent({ type: 'unexpected_end_of_execution' }));
    }
    res.end();
    return;
  }
  if (path === '/contexts' && req.method === 'POST') {
    const body = await jsonBody(req);
    const language = field(body, 'language', 'must be a language name', isString);
    const cwd = field(body, 'cwd', 'must be an absolute path', isString) ?? '/home/user';
    const context = await interpreter.createContext({ ...(language !== undefined ? { language } : {}), cwd });
    json(res, 200, context);
    return;
  }
  if (path === '/contexts' && req.method === 'GET') {
    json(res, 200, await interpreter.listContexts());
    return;
  }
  const match = /^\/contexts\/([^/]+)(\/restart)?$/.exec(path);
  if (match) {
    const id = decodeURIComponent(match[1] as string);
    if (match[2] && req.method === 'POST') {
      await interpreter.restartContext(id);
      res.writeHead(204).end();
      return;
    }
    if (!match[2] && req.method === 'DELETE') {
      await interpreter.removeContext(id);
      res.writeHead(204).end();
      return;
    }
  }
  throw new E2bError(404, `no code interpreter route ${req.method} ${path}`);
}
