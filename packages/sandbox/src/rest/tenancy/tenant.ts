/**
 * Tenants of the shared service: every box, volume, pool, tunnel and execution created over the
 * REST runtime belongs to one tenant, named by the caller's credential — an access token's `tenant` claim
 * (else its `sub`), or a managed API key's tenant. The operator (the `--api-key` holder, a loopback client
 * of a server without credentials, a token or key holding `sandbox.operator`) sees every tenant's resources.
 */

/** Tenant ids: 1-128 characters of letters, digits, `_ . @ : | -`, starting with a letter or digit. */
export const TENANT_RE = /^[A-Za-z0-9][A-Za-z0-9_.@:|-]{0,127}$/;

/** The tenant of the operator's own resources (and of boxes made outside the server, e.g. `sandbox run`). */
export const OPERATOR_TENANT = 'operator';

/** True when `value` is a valid tenant id ({@link TENANT_RE}). */
export function isTenant(value: unknown): value is string {
  return typeof value === 'string' && TENANT_RE.test(value);
}
