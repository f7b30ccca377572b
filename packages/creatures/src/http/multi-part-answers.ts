/**
 * Answers of the `/graphql` route that are not one JSON result: `@defer`/`@stream` operations
 * (incremental delivery, several parts) and batches (a JSON array of operations).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Response } from 'graphql-http';
import { negotiate, type RequestState } from '../engine.ts';
import type { CreatureErrorCode } from '../errors.ts';
import type { IncrementalExecutor } from '../incremental.ts';
import { toDefer20220824, wantsDefer20220824 } from './defer-20220824.ts';
import { writeIncrementalMultipart, writeIncrementalSse } from './multipart.ts';
import { checkParams } from './params.ts';
import { sendError } from './respond.ts';

/**
 * Answers an operation that uses `@defer`/`@stream`: as `multipart/mixed` (in the 2022-08-24 format
 * when the `Accept` header asks for `deferSpec=20220824`) or Server-Sent Events as the client accepts,
 * `406` when it accepts neither (the answer comes in several parts).
 */
export async function answerIncremental(
  executor: IncrementalExecutor,
  req: IncomingMessage,
  res: ServerResponse,
  method: string,
  raw: Record<string, unknown>,
  sse: boolean,
): Promise<void> {
  let params: ReturnType<typeof checkParams>;
  try {
    params = checkParams(raw);
  } catch (err) {
    sendError(res, 400, (err as Error).message, {}, 'BAD_REQUEST');
    return;
  }
  const accept = req.headers.accept ?? '';
  if (!sse && !accept.includes('multipart/mixed')) {
    sendError(
      res,
      406,
      'This operation uses @defer or @stream: accept multipart/mixed or text/event-stream to receive its parts',
      {},
      'INCREMENTAL_DELIVERY_NOT_ACCEPTED',
    );
    return;
  }
  const outcome = await executor(
    params.query,
    params.variables ?? undefined,
    params.operationName ?? undefined,
    method,
  );
  if (outcome.kind !== 'stream') {
    const body = JSON.stringify(outcome.body);
    res.writeHead(outcome.kind === 'error' ? outcome.status : 200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
    return;
  }
  if (sse) await writeIncrementalSse(res, outcome.payloads);
  else if (wantsDefer20220824(accept))
    await writeIncrementalMultipart(res, toDefer20220824(outcome.payloads), 'deferSpec=20220824');
  else await writeIncrementalMultipart(res, outcome.payloads);
}

/**
 * A batch: a JSON array of operations, each run in order as if POSTed alone, answered `200` with the
 * JSON array of their results (Apollo's batching protocol, as BatchHttpLink and graphql-request's
 * `batchRequests` send it). Refused with `400` when batching is off, the array is empty or longer than
 * `maxBatch`. `run` answers one operation (its body as a POST body) through the engine.
 */
export async function answerBatch(
  run: (item: unknown, state: RequestState) => Promise<Response> | Response,
  maxBatch: number,
  res: ServerResponse,
  accept: string,
  body: string,
): Promise<void> {
  const contentType = negotiate(accept || null);
  const refuse = (message: string, code: CreatureErrorCode) => sendError(res, 400, message, {}, code);
  if (maxBatch <= 0) {
    refuse(
      'Batched requests (a JSON array body) are not enabled on this server; send one operation per request',
      'BATCHING_NOT_ENABLED',
    );
    return;
  }
  let items: unknown;
  try {
    items = JSON.parse(body);
  } catch {
    refuse('Unparsable JSON body', 'BAD_REQUEST');
    return;
  }
  const list = items as unknown[];
  if (list.length === 0 || list.length > maxBatch) {
    refuse(`A batch must hold 1 to ${maxBatch} operations, got ${list.length}`, 'BATCH_TOO_LARGE');
    return;
  }
  const parts: string[] = [];
  for (const item of list) {
    const state: RequestState = { cacheable: false };
    const [itemBody, init] = await run(item, state);
    parts.push(
      itemBody ??
        JSON.stringify({
          errors: [{ message: `${init.status} ${init.statusText}`, extensions: { code: 'BAD_REQUEST' } }],
        }),
    );
  }
  const text = `[${parts.join(',')}]`;
  res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
