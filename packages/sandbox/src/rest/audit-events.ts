/**
 * Audit entries of requests handled outside Fastify's routing (WebSocket upgrades, CONNECT tunnels,
 * preview URLs): the routes' own entries are written by the server's hooks (`hooks.ts`).
 */
import type { Principal } from './auth.ts';
import type { AuditEntry, AuditLog } from './tenancy/audit.ts';
import type { HttpError } from './wire.ts';

/**
 * A WebSocket upgrade or CONNECT being handled outside Fastify's routing, for its audit entry: the
 * caller once authenticated, the route template once matched (`unmatched` before), and the resources
 * the request named (ids once resolved).
 */
export interface RawAttempt {
  principal?: Principal;
  method: string;
  route: string;
  resource?: Record<string, string>;
}

/** Writes to `audit` the entry of a request of `principal` (time now, its managed key id if any). */
export function writeAuditEvent(
  audit: AuditLog,
  principal: Pick<Principal, 'tenant' | 'subject' | 'keyId'>,
  what: Pick<AuditEntry, 'method' | 'route' | 'resource' | 'status' | 'error'>,
): void {
  audit.write({
    time: new Date().toISOString(),
    tenant: principal.tenant,
    subject: principal.subject,
    ...(principal.keyId ? { key_id: principal.keyId } : {}),
    ...what,
  });
}

/**
 * Writes to `audit` the entry of a refused upgrade or CONNECT (`attempt` as far as it got): the caller's
 * tenant, or `-` when its credential was refused, and the status and code it was answered with.
 */
export function writeAuditRefused(audit: AuditLog, attempt: RawAttempt, error: HttpError): void {
  const who = attempt.principal ?? { tenant: '-', subject: '-' };
  writeAuditEvent(audit, who, {
    method: attempt.method,
    route: attempt.route,
    ...(attempt.resource ? { resource: attempt.resource } : {}),
    status: error.status,
    error: error.code,
  });
}
