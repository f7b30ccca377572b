/**
 * The admin page's client of the administration REST API: openapi-fetch typed by `api-types.ts`, which is
 * generated from the API's OpenAPI document (`scripts/admin-api-types.ts`; a test fails when it is stale), so
 * every path, parameter, body and answer the page uses is checked against the document by the type check.
 * Each call carries the access token; on 401 the token is refreshed once and the call repeated.
 */
import createClient from 'openapi-fetch';
import type { components, paths } from './api-types.ts';
import { API } from './config.ts';
import { forgetTokens, refresh, tokens } from './oauth.ts';

export type { components, paths };

/** An API error: the HTTP status and the message the page shows. */
export class ApiError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

/** Called when the session ended (a 401 that a refresh did not cure): the page renders its signed-out view. */
let sessionEnded: () => void = () => undefined;
/** Sets what happens when the session ends. */
export function onSessionEnded(handler: () => void): void {
  sessionEnded = handler;
}

function withToken(request: Request, accessToken: string): Request {
  request.headers.set('authorization', `Bearer ${accessToken}`);
  return request;
}

/** `fetch` with the access token; refreshes it once on 401. @throws ApiError 401 when not signed in. */
async function authorizedFetch(request: Request): Promise<Response> {
  let current = tokens();
  if (!current) throw new ApiError(401, 'not signed in');
  const again = request.clone();
  let res = await fetch(withToken(request, current.accessToken));
  if (res.status === 401 && current.refreshToken) {
    try {
      current = await refresh(current.refreshToken);
      res = await fetch(withToken(again, current.accessToken));
    } catch {
      // fall through with the 401
    }
  }
  return res;
}

/** The typed client: `client.GET('/users', { params: { query: { limit: 50 } } })` and so on. */
export const client = createClient<paths>({ baseUrl: API, fetch: authorizedFetch });

/** The error bodies of the API: `{ error }`, or the permission middleware's `{ error, error_description, permission }`. */
interface ErrorBody {
  error?: string;
  error_description?: string;
  permission?: string | null;
}

/**
 * The data of an openapi-fetch result. @throws ApiError with the API's message on an error answer; on 401 the
 * stored tokens are dropped and the page shows its signed-out view.
 */
export async function call<T>(
  pending: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<NonNullable<T>> {
  const { data, error, response } = await pending;
  if (response.status === 401) {
    forgetTokens();
    sessionEnded();
    throw new ApiError(401, 'Your session ended; sign in again.');
  }
  if (!response.ok) {
    const body: ErrorBody = typeof error === 'object' && error !== null ? (error as ErrorBody) : {};
    const message = body.error_description
      ? `${body.error}: ${body.error_description} (${body.permission ?? ''})`
      : body.error;
    throw new ApiError(response.status, message ?? `HTTP ${response.status}`);
  }
  return data as NonNullable<T>;
}
