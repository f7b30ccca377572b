/**
 * The OAuth extension settings of one client on the admin page (`PUT {BasePath}/api/clients/{id}/metadata`):
 * token endpoint authentication method and keys, DPoP required, PAR required, resource indicators, the
 * token-exchange policy, the web origins allowed cross-origin (CORS) and whether the ID token carries the
 * scope claims.
 */
import { TOKEN_ENDPOINT_AUTH_METHODS } from '../../store/constants.ts';
import { call, client, type paths } from './api.ts';
import { card, checkbox, el, field, list, text } from './dom.ts';
import { act } from './shell.ts';

type Client = paths['/clients/{clientId}']['get']['responses'][200]['content']['application/json'];
/** The settings as `PUT …/metadata` takes them. */
type Settings = paths['/clients/{clientId}/metadata']['put']['requestBody']['content']['application/json'];

/** Token endpoint authentication methods (RFC 7591 §2); '' leaves the method free. */
const AUTH_METHODS = ['', ...TOKEN_ENDPOINT_AUTH_METHODS] as const;

/**
 * The settings card of `client`: a form labelled `OAuth settings of {clientId}` filled from `client.metadata`;
 * saving replaces the settings (a secret issued for `client_secret_jwt` is shown once in the status line).
 */
export function clientSettingsCard(record: Client): HTMLFormElement {
  const m = record.metadata ?? {};
  const exchange = m.tokenExchange;
  const method = el(
    'select',
    { name: 'tokenEndpointAuthMethod' },
    AUTH_METHODS.map((value) =>
      el('option', {
        value,
        text: value || '(any secret method)',
        selected: (m.tokenEndpointAuthMethod ?? '') === value,
      }),
    ),
  );
  return card(
    { 'aria-label': `OAuth settings of ${record.clientId}` },
    `OAuth settings of ${record.clientId}`,
    [
      field('Token endpoint authentication', method),
      checkbox(
        'dpopBoundAccessTokens',
        'DPoP required (DPoP-bound tokens only)',
        m.dpopBoundAccessTokens === true,
      ),
      checkbox(
        'requirePushedAuthorizationRequests',
        'PAR required',
        m.requirePushedAuthorizationRequests === true,
      ),
      field('JWKS URI (private_key_jwt)', el('input', { name: 'jwksUri', value: m.jwksUri ?? '' })),
      field(
        'JWKS (private_key_jwt, JSON)',
        el('textarea', { name: 'jwks', value: m.jwks ? JSON.stringify(m.jwks) : '' }),
      ),
      field(
        'Allowed resources',
        el('textarea', { name: 'allowedResources', value: (m.allowedResources ?? []).join('\n') }),
      ),
      field(
        'Token exchange: subject clients',
        el('input', { name: 'subjectClients', value: (exchange?.subjectClients ?? []).join(', ') }),
      ),
      checkbox('impersonation', 'Token exchange: impersonation', exchange?.impersonation === true),
      checkbox('delegation', 'Token exchange: delegation', exchange?.delegation === true),
      field(
        'Web origins (CORS; empty: the origins of the redirect URIs)',
        el('textarea', { name: 'webOrigins', value: (m.webOrigins ?? []).join('\n') }),
      ),
      checkbox(
        'claimsInIdToken',
        'Profile, e-mail and role claims in the ID token (off: UserInfo only)',
        m.claimsInIdToken !== false,
      ),
    ],
    'Save OAuth settings',
    (data) => {
      const body: Settings = {};
      const chosen = text(data, 'tokenEndpointAuthMethod');
      if (chosen) body.tokenEndpointAuthMethod = chosen as NonNullable<Settings['tokenEndpointAuthMethod']>;
      if (data.get('dpopBoundAccessTokens') === 'on') body.dpopBoundAccessTokens = true;
      if (data.get('requirePushedAuthorizationRequests') === 'on')
        body.requirePushedAuthorizationRequests = true;
      const jwksUri = text(data, 'jwksUri').trim();
      if (jwksUri) body.jwksUri = jwksUri;
      const jwks = text(data, 'jwks').trim();
      if (jwks) {
        try {
          // the server validates the key set and names what is wrong
          body.jwks = JSON.parse(jwks) as Settings['jwks'];
        } catch {
          act('', () => Promise.reject(new Error('JWKS: not valid JSON')));
          return;
        }
      }
      const resources = list(text(data, 'allowedResources'));
      if (resources.length) body.allowedResources = resources;
      const subjects = list(text(data, 'subjectClients'));
      if (subjects.length) {
        body.tokenExchange = {
          subjectClients: subjects,
          impersonation: data.get('impersonation') === 'on',
          delegation: data.get('delegation') === 'on',
        };
      }
      const origins = list(text(data, 'webOrigins'));
      if (origins.length) body.webOrigins = origins;
      if (data.get('claimsInIdToken') !== 'on') body.claimsInIdToken = false;
      act(
        (saved) =>
          saved.clientSecret
            ? `Saved the OAuth settings of ${record.clientId}. Its new secret (shown once): `
            : `Saved the OAuth settings of ${record.clientId}.`,
        () =>
          call(
            client.PUT('/clients/{clientId}/metadata', {
              params: { path: { clientId: record.clientId } },
              body,
            }),
          ),
      );
    },
  );
}
