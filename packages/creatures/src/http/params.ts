/**
 * Reading the GraphQL parameters (`query`, `variables`, `operationName`, `extensions`) of one request,
 * as graphql-http's `parseRequestParams` hook: GraphQL over HTTP §"Request parameters" for GET (URL query
 * string) and POST `application/json`, plus POST `application/graphql` (the body is the query text;
 * `variables` and `operationName` may come in the URL query string, as express-graphql, Yoga and Mercurius
 * accept), then {@link PersistedQueries} fills in the text of a persisted query. Malformed parameters throw
 * an `Error` naming the parameter (graphql-http answers it with `400`); an unsupported body type gets `415`
 * with a JSON error body.
 */
import type { RequestParams as GraphQLRequestParams, Request, Response } from 'graphql-http';
import type { CreatureErrorCode } from '../errors.ts';
import type { PersistedQueries, RequestParams } from './persisted.ts';

/** Media type and charset of a `Content-Type` header value, lower case (`['application/json', 'charset=utf-8']`). */
export function mediaTypeOf(contentType: string | null | undefined): [string, string | undefined] {
  const [mediaType = '', ...rest] = (contentType ?? '').replace(/\s/g, '').toLowerCase().split(';');
  return [mediaType, rest.find((p) => p.startsWith('charset='))];
}

function header(req: Request<unknown, unknown>, name: string): string | null {
  const headers = req.headers as { get?: (n: string) => string | null | undefined };
  return typeof headers.get === 'function' ? (headers.get(name) ?? null) : null;
}

function jsonParam(search: URLSearchParams, name: string): unknown {
  const raw = search.get(name);
  if (raw === null || raw === '') return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    throw new Error(`The ${name} parameter of the URL is not valid JSON`);
  }
}

/** The GraphQL parameters of a URL's query string (`query`, `operationName`, `documentId`, JSON `variables` and `extensions`); throws for JSON that does not parse. */
export function fromSearch(url: string): RequestParams {
  const q = url.indexOf('?');
  const search = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  const params: RequestParams = {};
  const query = search.get('query');
  if (query !== null) params.query = query;
  const operationName = search.get('operationName');
  if (operationName !== null && operationName !== '') params.operationName = operationName;
  const documentId = search.get('documentId');
  if (documentId !== null) params.documentId = documentId;
  params.variables = jsonParam(search, 'variables');
  params.extensions = jsonParam(search, 'extensions');
  return params;
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Checks the parameters' types (GraphQL over HTTP §"Request parameters"); throws naming the first bad one. */
export function checkParams(params: RequestParams): GraphQLRequestParams {
  const { query, variables, operationName, extensions } = params;
  if (query == null) throw new Error('Missing query');
  if (typeof query !== 'string') throw new Error('Invalid query: it must be a string');
  if (variables != null && !isObject(variables)) throw new Error('Invalid variables: it must be an object');
  if (operationName != null && typeof operationName !== 'string') {
    throw new Error('Invalid operationName: it must be a string');
  }
  if (extensions != null && !isObject(extensions))
    throw new Error('Invalid extensions: it must be an object');
  return {
    query,
    variables: (variables ?? undefined) as Record<string, unknown> | undefined,
    operationName: (operationName ?? undefined) as string | undefined,
    extensions: (extensions ?? undefined) as Record<string, unknown> | undefined,
  };
}

/** A JSON error response of graphql-http's `Response` shape. */
export function errorResponse(
  status: number,
  contentType: string,
  message: string,
  code: CreatureErrorCode,
): Response {
  return [
    JSON.stringify({ errors: [{ message, extensions: { code } }] }),
    {
      status,
      statusText: status === 415 ? 'Unsupported Media Type' : 'Bad Request',
      headers: { 'content-type': contentType },
    },
  ];
}

/** The client's address of a graphql-http request whose `raw` is a `node:http` request, if known. */
function clientOf(req: Request<unknown, unknown>): string | undefined {
  const raw = req.raw as { socket?: { remoteAddress?: string } } | undefined;
  return raw?.socket?.remoteAddress;
}

/**
 * Creates the `parseRequestParams` hook. `negotiate` gives the response media type of an `Accept` header;
 * an error of a persisted query is answered in it, with its status for `application/graphql-response+json`
 * and `200` for `application/json` (GraphQL over HTTP §"application/json" legacy rules).
 */
export function createParamsParser(
  persisted: PersistedQueries,
  negotiate: (accept: string | null) => string,
): (req: Request<unknown, unknown>) => Promise<GraphQLRequestParams | Response> {
  return async (req) => {
    let params: RequestParams;
    if (req.method !== 'GET' && req.method !== 'POST') {
      return [null, { status: 405, statusText: 'Method Not Allowed', headers: { allow: 'GET, POST' } }];
    }
    if (req.method === 'GET') {
      params = fromSearch(req.url);
    } else {
      const [mediaType, charset] = mediaTypeOf(header(req, 'content-type'));
      const utf8 = charset === undefined || charset === 'charset=utf-8' || charset === 'charset=utf8';
      const body = typeof req.body === 'function' ? await req.body() : req.body;
      if (mediaType === 'application/json' && utf8) {
        let data: unknown = body;
        if (typeof body === 'string') {
          if (body === '') throw new Error('Missing body');
          try {
            data = JSON.parse(body);
          } catch {
            throw new Error('Unparsable JSON body');
          }
        }
        if (!isObject(data)) throw new Error('JSON body must be an object');
        params = data;
      } else if (mediaType === 'application/graphql' && utf8) {
        if (typeof body !== 'string' || body.trim() === '')
          throw new Error('Missing query: the application/graphql body is empty');
        const fromUrl = fromSearch(req.url);
        params = { ...fromUrl, query: body };
      } else {
        return errorResponse(
          415,
          'application/json; charset=utf-8',
          `Unsupported content type "${mediaType || '(none)'}${charset ? `; ${charset}` : ''}": send application/json (a JSON object of query, variables, operationName, extensions) or application/graphql (the query text), in UTF-8`,
          'UNSUPPORTED_MEDIA_TYPE',
        );
      }
    }
    const resolved = persisted.resolve(params, clientOf(req));
    if ('error' in resolved) {
      const contentType = negotiate(header(req, 'accept'));
      const status = contentType.startsWith('application/json') ? 200 : resolved.error.status;
      const [body, init] = errorResponse(status, contentType, resolved.error.message, resolved.error.code);
      return [
        body,
        {
          ...init,
          statusText: status === 200 ? 'OK' : 'Bad Request',
          headers: { ...init.headers, 'cache-control': 'no-store' },
        },
      ];
    }
    return checkParams(resolved.params);
  };
}
