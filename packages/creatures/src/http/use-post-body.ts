/**
 * The `/graphql` route's answer to a POST whose body has been read, as a plugin: JSON bodies by the fast
 * path (`use-fast-path.ts`), else as a batch (a JSON array of operations, `multi-part-answers.ts`), an
 * incremental delivery (`@defer`/`@stream`), an Apollo multipart subscription, or through the engine's
 * full handler (`use-engine.ts`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type IncrementalExecutor, usesIncrementalDelivery } from '../incremental.ts';
import type { FailHandler } from './fail.ts';
import { answerBatch, answerIncremental } from './multi-part-answers.ts';
import { type MultipartSubscriptions, wantsMultipartSubscription } from './multipart.ts';
import { checkParamsOrUndefined, isSubscription, paramsOf } from './route-helpers.ts';
import type { EnginePlugin } from './use-engine.ts';
import type { FastPath } from './use-fast-path.ts';
import type { ResponseCachePlugin } from './use-response-cache.ts';

/** Options of {@link postBodyPlugin}. */
export interface PostBodyOptions {
  cache: ResponseCachePlugin;
  full: EnginePlugin;
  answerFast: FastPath;
  /** Most operations in one batch; 0 turns batching off (a JSON array body then gets 400). */
  maxBatch: number;
  /** Runs `@defer`/`@stream` operations; without it they go to the engine (and fail validation). */
  incremental?: IncrementalExecutor;
  /** Apollo multipart HTTP subscriptions, if subscriptions are on. */
  multipartSubscriptions?: MultipartSubscriptions;
  /** Called when answering failed unexpectedly. */
  fail: FailHandler;
}

/**
 * Answers a POST of `bytes` with `Content-Type` `contentType` (its media type `mediaType`; `json`: a JSON
 * media type) and `Accept` `accept`.
 */
export type PostBodyAnswer = (
  req: IncomingMessage,
  res: ServerResponse,
  url: string,
  accept: string,
  contentType: string,
  mediaType: string,
  json: boolean,
  bytes: Buffer,
) => void;

/** Tells whether a request text (query or URL) asks for incremental delivery that `incremental` runs. */
export function incrementalTest(incremental: IncrementalExecutor | undefined): (text: string) => boolean {
  return (text) => incremental !== undefined && usesIncrementalDelivery(text);
}

/** Creates the POST body plugin. */
export function postBodyPlugin(options: PostBodyOptions): PostBodyAnswer {
  const { cache, full, answerFast, maxBatch, multipartSubscriptions, fail } = options;
  const { responses } = cache;
  const isIncremental = incrementalTest(options.incremental);
  return function answerPost(req, res, url, accept, contentType, mediaType, json, bytes) {
    const method = 'POST';
    if (json && answerFast(req, res, url, accept, contentType, bytes)) return;
    const body = bytes.toString('utf8');
    if (mediaType === 'application/json' && body.trimStart().startsWith('[')) {
      answerBatch(
        (item, state) => full.engineRequest(req, 'POST', url, item, state),
        maxBatch,
        res,
        accept,
        body,
      ).catch((err: unknown) => fail(req, res, err));
      return;
    }
    if (
      mediaType === 'application/json' &&
      (isIncremental(body) || (multipartSubscriptions && wantsMultipartSubscription(accept)))
    ) {
      const params = paramsOf(method, url, body);
      if (params && isIncremental(String(params.query ?? ''))) {
        answerIncremental(options.incremental!, req, res, method, params, false).catch((err: unknown) =>
          fail(req, res, err),
        );
        return;
      }
      if (params && multipartSubscriptions && wantsMultipartSubscription(accept)) {
        const { query, variables, operationName } = checkParamsOrUndefined(params) ?? {};
        if (query !== undefined && isSubscription(query, operationName ?? undefined)) {
          multipartSubscriptions(req, res, {
            query,
            variables: variables ?? undefined,
            operationName: operationName ?? undefined,
          }).catch((err: unknown) => fail(req, res, err));
          return;
        }
      }
    }
    if (json) {
      full
        .execute(req, res, method, url, body, responses && bytes, cache.variantOf(accept, contentType))
        .catch((err: unknown) => fail(req, res, err));
    } else full.respond(req, res, method, url, accept, contentType, body);
  };
}
