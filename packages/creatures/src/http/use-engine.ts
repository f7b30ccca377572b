/**
 * The `/graphql` route's full handler as a plugin: requests the fast path does not answer run through the
 * engine's graphql-http handler ({@link EnginePlugin.execute}); GET and non-JSON POST requests are first
 * looked up in the response cache and tried on the fast path ({@link EnginePlugin.respond}).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Engine, RequestState } from '../engine.ts';
import type { FastAnswer } from '../engine-fast.ts';
import type { FailHandler } from './fail.ts';
import { ResponseCache, writeCached } from './response-cache.ts';
import { notModified } from './route-helpers.ts';
import type { AnswerInit, CacheKey, ResponseCachePlugin } from './use-response-cache.ts';

/** Options of {@link enginePlugin}. */
export interface EnginePluginOptions {
  engine: Engine;
  cache: ResponseCachePlugin;
  fail: FailHandler;
}

/** The full-handler plugin of the `/graphql` route. */
export interface EnginePlugin {
  /**
   * Runs one request (`body`: the text of one operation for POST, `''` for GET) through the engine's
   * graphql-http handler with `state` as its context; resolves with the handler's body and init.
   */
  engineRequest(
    req: IncomingMessage,
    method: string,
    url: string,
    body: unknown,
    state: RequestState,
  ): ReturnType<Engine>;
  /** Runs the request through the engine and writes the answer, keeping a cacheable one under `key`/`variant`. */
  execute(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    url: string,
    body: string,
    key: CacheKey,
    variant: number,
  ): Promise<void>;
  /** Answers from the response cache, or runs the request through the engine (caching a cacheable answer). */
  respond(
    req: IncomingMessage,
    res: ServerResponse,
    method: string,
    url: string,
    accept: string,
    contentType: string,
    body: string,
  ): void;
}

/** The head of a `200` answer of media type `contentType`. */
function okInit(contentType: string): AnswerInit {
  return { status: 200, statusText: 'OK', headers: { 'content-type': contentType } };
}

/** Creates the full-handler plugin. */
export function enginePlugin(options: EnginePluginOptions): EnginePlugin {
  const { engine, cache, fail } = options;
  const { responses } = cache;

  const engineRequest: EnginePlugin['engineRequest'] = (req, method, url, body, state) =>
    engine({
      method,
      url,
      headers: { get: (name: string) => (req.headers[name.toLowerCase()] as string | undefined) ?? null },
      body: body as string,
      raw: req,
      context: state,
    });

  const respond: EnginePlugin['respond'] = (req, res, method, url, accept, contentType, body) => {
    const key =
      responses && (method === 'GET' || method === 'POST')
        ? ResponseCache.textKey(method, accept, contentType, method === 'GET' ? url : body)
        : undefined;
    if (key !== undefined) {
      const hit = responses!.getText(key);
      if (hit) {
        if (method === 'GET' && notModified(req, res, hit.headers)) return;
        writeCached(res, hit);
        return;
      }
    }
    // JSON POST bodies took the fast path (use-fast-path.ts) already.
    let answer: ReturnType<Engine['fast']>;
    try {
      answer = method === 'GET' ? engine.fast(method, url, body, req.headers.accept) : undefined;
    } catch (err) {
      fail(req, res, err);
      return;
    }
    const ok = (done: FastAnswer, startGeneration: number) =>
      cache.send(req, res, method, key, -1, startGeneration, okInit(done.contentType), done.body, true);
    if (answer === undefined) {
      execute(req, res, method, url, body, key, -1).catch((err: unknown) => fail(req, res, err));
    } else if (answer instanceof Promise) {
      const startGeneration = cache.generation;
      answer
        .then((done) => (done ? ok(done, startGeneration) : execute(req, res, method, url, body, key, -1)))
        .catch((err: unknown) => fail(req, res, err));
    } else ok(answer, cache.generation);
  };

  const execute: EnginePlugin['execute'] = async (req, res, method, url, body, key, variant) => {
    const state: RequestState = { cacheable: false };
    const startGeneration = cache.generation;
    const [resBody, init] = await engineRequest(req, method, url, body, state);
    cache.send(req, res, method, key, variant, startGeneration, init, resBody ?? undefined, state.cacheable);
  };

  return { engineRequest, execute, respond };
}
