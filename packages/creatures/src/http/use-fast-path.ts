/**
 * The `/graphql` route's fast path for JSON POST bodies as a plugin: the response cache by body bytes,
 * then the engine's fast path (`engine-fast.ts`, which keeps what the body asks for by its bytes).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Engine } from '../engine.ts';
import type { FailHandler } from './fail.ts';
import { writeCached } from './response-cache.ts';
import type { EnginePlugin } from './use-engine.ts';
import type { ResponseCachePlugin } from './use-response-cache.ts';

/** Options of {@link fastPathPlugin}. */
export interface FastPathOptions {
  engine: Engine;
  cache: ResponseCachePlugin;
  /** Where an answer the fast path cut short goes. */
  execute: EnginePlugin['execute'];
  /** Called when answering failed unexpectedly. */
  fail: FailHandler;
}

/**
 * Answers a JSON POST from the response cache or by the engine's fast path; returns false, having
 * answered nothing, when the body needs the full route (batches, `@defer`/`@stream`, subscriptions,
 * mutations, errors). An answer the fast path cut short (a graphql-jit result with errors) goes to
 * `execute` from here.
 */
export type FastPath = (
  req: IncomingMessage,
  res: ServerResponse,
  url: string,
  accept: string,
  contentType: string,
  bytes: Buffer,
) => boolean;

/** Creates the fast-path plugin. */
export function fastPathPlugin(options: FastPathOptions): FastPath {
  const { engine, cache, execute, fail } = options;
  const { responses } = cache;
  return function answerFast(req, res, url, accept, contentType, bytes) {
    const variant = cache.variantOf(accept, contentType);
    if (responses && variant >= 0) {
      const hit = responses.getBytes(bytes, variant);
      if (hit) {
        writeCached(res, hit);
        return true;
      }
    }
    let answer: ReturnType<Engine['fast']>;
    try {
      answer = engine.fast('POST', url, bytes, req.headers.accept, true);
    } catch (err) {
      fail(req, res, err);
      return true;
    }
    if (answer === undefined) return false;
    const key = responses && bytes;
    if (answer instanceof Promise) {
      const startGeneration = cache.generation;
      answer
        .then((done) => {
          if (done) cache.sendAnswer(res, done, key, variant, startGeneration);
          else return execute(req, res, 'POST', url, bytes.toString('utf8'), key, variant);
        })
        .catch((err: unknown) => fail(req, res, err));
    } else cache.sendAnswer(res, answer, key, variant, cache.generation);
    return true;
  };
}
