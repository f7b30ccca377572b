/**
 * Tenants of the shared service: every box, volume, pool, tunnel and execution created over the
 * REST runtime belongs to one tenant, named by the caller's credential — an access token's `tenant` claim
 * (else its `sub`), or a managed API key's tenant. The operator (the `--api-key` holder, a loopback client
 * of a server without credentials, a token or key holding `sandbox.operator`) sees every tenant's resources.
 * Being the operator comes from the credential only, never from a tenant name: the operator's own tenant
 * id is reserved ({@link isReservedTenant}), so a token whose `sub` or `tenant` claim says `operator`, or a
 * managed key created for tenant `operator`, is refused instead of sharing the operator's boxes.
 */

/** Tenant ids: 1-128 characters of letters, digits, `_ . @ : | -`, starting with a letter or digit. */
export const TENANT_RE = /^[A-Za-z0-9][A-Za-z0-9_.@:|-]{0,127}$/;

/** The tenant of the operator's own resources (and of boxes made outside the server, e.g. `sandbox run`). */
export const OPERATOR_TENANT = 'operator';

/** True when `value` is a valid tenant id ({@link TENANT_RE}). */
export function isTenant(value: unknown): value is string {
  return typeof value === 'string' && TENANT_RE.test(value);
}

/** Tenant ids that only operator credentials act as (compared case-insensitively): {@link OPERATOR_TENANT}. */
export const RESERVED_TENANTS: ReadonlySet<string> = new Set([OPERATOR_TENANT]);

/** True when `tenant` is one of {@link RESERVED_TENANTS} (in any letter case). */
export function isReservedTenant(tenant: string): boolean {
  return RESERVED_TENANTS.has(tenant.toLowerCase());
}
