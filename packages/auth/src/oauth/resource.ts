/**
 * Resource indicators (RFC 8707): the `resource` parameters of a token request name the protected resources
 * the access token is for; the token's `aud` is then exactly those resources (audience restriction, §2.2).
 */
import type { ClientRecord } from '../store/types.ts';
import { OAuthError } from './errors.ts';
import type { FormParams } from './form.ts';

/** Most `resource` parameters accepted in one request. */
const MAX_RESOURCES = 8;

/**
 * The audience requested by a token request's `resource` parameters (RFC 8707 §2): undefined when there is
 * none (the server's default audience applies), else the distinct resources, each an absolute URI without
 * fragment (§2) that the client may request (its metadata `allowedResources`).
 * @throws OAuthError `invalid_target` (§2) for a malformed, empty or not allowed resource, or too many.
 */
export function requestedAudience(form: FormParams, client: ClientRecord): string[] | undefined {
  const values = form.getAll('resource');
  if (values.length === 0) return undefined;
  if (values.length > MAX_RESOURCES)
    throw new OAuthError('invalid_target', `at most ${MAX_RESOURCES} resource parameters`);
  const allowed = client.metadata.allowedResources ?? [];
  const resources = new Set<string>();
  for (const value of values) {
    let url: URL | undefined;
    try {
      url = new URL(value);
    } catch {
      url = undefined;
    }
    if (!url || value.includes('#') || value.length > 2048) {
      throw new OAuthError(
        'invalid_target',
        'resource must be an absolute URI without fragment (RFC 8707 §2)',
      );
    }
    if (!allowed.includes(value)) {
      throw new OAuthError(
        'invalid_target',
        `resource '${value.slice(0, 200)}' is not allowed for this client`,
      );
    }
    resources.add(value);
  }
  return [...resources];
}
