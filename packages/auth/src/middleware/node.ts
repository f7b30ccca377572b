/**
 * Plain Node.js adapter of the permission middleware: a connect/Express-style `(req, res, next)` function
 * (spec 001 "Business endpoints protected by the permission middleware"). It sets `req.auth` to the
 * {@link AuthorizationOutcome}; on denial it writes the spec's JSON body with 401/403 and `WWW-Authenticate`
 * (RFC 6750 §3), or lets `onDenied` write the body.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type {
  AuthorizationOutcome,
  AuthorizationService,
  Denial,
  EndpointRequirement,
} from '../authorization.ts';
import { requestAuthorization } from '../authorization-wire.ts';
import type { AuthorizationDecision } from '../reasons.ts';

/** A request after the middleware ran. */
export type AuthorizedRequest = IncomingMessage & {
  auth?: AuthorizationOutcome;
  params?: Record<string, unknown>;
};

/** Options of {@link createAuthMiddleware}. */
export interface NodeAuthMiddlewareOptions {
  /** The endpoint's requirement, fixed or per request (undefined → not protected). */
  requirement?: EndpointRequirement | ((req: IncomingMessage) => EndpointRequirement | undefined);
  /**
   * `OnDenied` (spec 001): status and `WWW-Authenticate` are already set on `res`; write and end your own body.
   * When set, the default body is not written (the response is ended if `onDenied` leaves it open).
   */
  onDenied?: (
    req: IncomingMessage,
    res: ServerResponse,
    denied: Denial & { decision: AuthorizationDecision },
  ) => unknown;
  /** The resource handed to policies (default: `req.params` when a router set it). */
  resource?: (req: IncomingMessage) => unknown;
  /**
   * Accept the token from the `access_token` query parameter on WebSocket upgrade requests (`GET` with
   * `Upgrade: websocket` and no `Authorization` header; see `upgradeQueryToken`). Default false. Plain HTTP
   * requests never authenticate through the query string.
   */
  queryTokenOnUpgrade?: boolean;
}

/** `next` of connect/Express: called with no argument to continue, or with an error (storage failure). */
export type NextFunction = (error?: unknown) => void;

/**
 * Creates the middleware. Granted → `next()`; denied → the answer is written and `next` is not called;
 * storage failure → `next(error)`.
 */
export function createAuthMiddleware(
  service: AuthorizationService,
  options: NodeAuthMiddlewareOptions = {},
): (req: IncomingMessage, res: ServerResponse, next: NextFunction) => void {
  const requirementOf =
    typeof options.requirement === 'function'
      ? options.requirement
      : () => options.requirement as EndpointRequirement | undefined;
  return (req, res, next) => {
    const request = req as AuthorizedRequest;
    const handle = async () => {
      const outcome = await service.authorize({
        authorization: requestAuthorization(req.method, req.headers, req.url, options.queryTokenOnUpgrade),
        requirement: requirementOf(req),
        request: {
          method: req.method ?? 'GET',
          url: req.url ?? '/',
          headers: req.headers,
          params: request.params,
          remoteAddress: req.socket.remoteAddress ?? null,
        },
        resource: options.resource ? options.resource(req) : request.params,
        htu: `${'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`,
      });
      request.auth = outcome;
      const denial = outcome.denial;
      if (!denial) return next();
      res.statusCode = denial.status;
      for (const [name, value] of Object.entries(denial.headers)) res.setHeader(name, value);
      if (options.onDenied) {
        await options.onDenied(req, res, { ...denial, decision: outcome.decision });
        if (!res.writableEnded) res.end();
        return;
      }
      res.setHeader('content-type', 'application/json; charset=utf-8');
      res.end(JSON.stringify(denial.body));
    };
    handle().catch(next);
  };
}
