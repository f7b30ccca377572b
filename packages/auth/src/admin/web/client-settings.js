// The OAuth extension settings of one client on the admin page (`PUT {BasePath}/api/clients/{id}/metadata`):
// token endpoint authentication method and keys, DPoP required, PAR required, resource indicators, the
// token-exchange policy, the web origins allowed cross-origin (CORS) and whether the ID token carries the
// scope claims. Loaded by app.js, which passes its DOM and API helpers in `ui`.

/** Token endpoint authentication methods (RFC 7591 §2); '' leaves the method free. */
const AUTH_METHODS = [
  '',
  'client_secret_basic',
  'client_secret_post',
  'client_secret_jwt',
  'private_key_jwt',
  'none',
];

/**
 * The settings card of `client`: a form labelled `OAuth settings of {clientId}` filled from `client.metadata`;
 * saving replaces the settings (a secret issued for `client_secret_jwt` is shown once in the status line).
 * `ui`: `{ el, field, checkbox, card, act, api, list }` of app.js.
 */
export function clientSettingsCard(client, ui) {
  const { el, field, checkbox, card, act, api, list } = ui;
  const m = client.metadata ?? {};
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
    { 'aria-label': `OAuth settings of ${client.clientId}` },
    `OAuth settings of ${client.clientId}`,
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
      const body = {};
      const chosen = String(data.get('tokenEndpointAuthMethod'));
      if (chosen) body.tokenEndpointAuthMethod = chosen;
      if (data.get('dpopBoundAccessTokens') === 'on') body.dpopBoundAccessTokens = true;
      if (data.get('requirePushedAuthorizationRequests') === 'on')
        body.requirePushedAuthorizationRequests = true;
      const jwksUri = String(data.get('jwksUri')).trim();
      if (jwksUri) body.jwksUri = jwksUri;
      const jwks = String(data.get('jwks')).trim();
      if (jwks) {
        try {
          body.jwks = JSON.parse(jwks);
        } catch {
          act('', () => Promise.reject(new Error('JWKS: not valid JSON')));
          return;
        }
      }
      const resources = list(String(data.get('allowedResources')));
      if (resources.length) body.allowedResources = resources;
      const subjects = list(String(data.get('subjectClients')));
      if (subjects.length) {
        body.tokenExchange = {
          subjectClients: subjects,
          impersonation: data.get('impersonation') === 'on',
          delegation: data.get('delegation') === 'on',
        };
      }
      const origins = list(String(data.get('webOrigins')));
      if (origins.length) body.webOrigins = origins;
      if (data.get('claimsInIdToken') !== 'on') body.claimsInIdToken = false;
      act(
        (saved) =>
          saved.clientSecret
            ? `Saved the OAuth settings of ${client.clientId}. Its new secret (shown once): `
            : `Saved the OAuth settings of ${client.clientId}.`,
        () => api('PUT', `clients/${encodeURIComponent(client.clientId)}/metadata`, body),
      );
    },
  );
}
