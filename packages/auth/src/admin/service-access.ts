/**
 * {@link AdminAccess} over the core's {@link AuthorizationService} (the decision engine of the permission
 * middleware, spec 001 "Business endpoints protected by the permission middleware"): the same token checks
 * (signature, expiry, subject enabled, not locked out, security stamp unchanged), the same reason table and
 * the same denial answer (status, `WWW-Authenticate`, `{error, error_description, permission}` body).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthorizationOutcome, AuthorizationService, Denial } from '../authorization.ts';
import type { AdminAccess, AdminCaller } from './access.ts';

/** Options of {@link serviceAccess}. */
export interface ServiceAccessOptions {
  /**
   * Replaces the default denial body (spec 001 `OnDenied`): called with the denial and the request; the
   * status and `WWW-Authenticate` header stay. Default: the spec's body.
   */
  onDenied?: (denial: Denial, request: FastifyRequest) => unknown;
}

/**
 * Adapts an {@link AuthorizationService} to the administration API.
 * @returns an {@link AdminAccess} whose `require(code)` answers denials itself (401/403 per spec 001).
 */
export function serviceAccess(
  service: AuthorizationService,
  options: ServiceAccessOptions = {},
): AdminAccess {
  const outcomes = new WeakMap<FastifyRequest, AuthorizationOutcome>();
  const granted = (request: FastifyRequest): AuthorizationOutcome => {
    const outcome = outcomes.get(request);
    if (!outcome?.decision.isGranted || !outcome.subject) {
      throw new Error('administration API: request was not authorized by require()');
    }
    return outcome;
  };
  return {
    require(permission: string) {
      return async (request: FastifyRequest, reply: FastifyReply) => {
        const outcome = await service.authorize({
          authorization: request.headers.authorization,
          requirement: { permission },
          request: {
            method: request.method,
            url: request.url,
            headers: request.headers,
            params: request.params as Record<string, unknown>,
            query: request.query as Record<string, unknown>,
            remoteAddress: request.ip,
          },
        });
        if (outcome.denial) {
          const { status, headers, body } = outcome.denial;
          reply.code(status).headers(headers).type('application/json; charset=utf-8');
          return reply.send(options.onDenied ? options.onDenied(outcome.denial, request) : body);
        }
        outcomes.set(request, outcome);
        return undefined;
      };
    },
    async holds(request: FastifyRequest, permission: string) {
      return granted(request).check(permission).isGranted;
    },
    caller(request: FastifyRequest): AdminCaller {
      const subject = granted(request).subject!;
      return {
        subjectId: subject.id,
        subjectName: subject.kind === 'user' ? subject.name : null,
        clientId: subject.clientId,
      };
    },
  };
}
