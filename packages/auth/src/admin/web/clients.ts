/**
 * The Clients view: the list with Enable/Disable, New secret (confidential clients) and Delete, the editor
 * (redirect URIs, scopes, permissions, grant types, logout settings, the OAuth settings card, two factors)
 * and the "New client" form.
 */
import { call, client, type paths } from './api.ts';
import { clientSettingsCard } from './client-settings.ts';
import { GRANTS } from './config.ts';
import { button, card, checkbox, el, field, joined, listField, text } from './dom.ts';
import { mfaRequirement } from './mfa.ts';
import { resourceView } from './resource-view.ts';
import { act, confirmThen } from './shell.ts';

/** A client as the API lists it. */
export type Client = paths['/clients/{clientId}']['get']['responses'][200]['content']['application/json'];
type NewClient = paths['/clients']['post']['requestBody']['content']['application/json'];

/** The label of a grant type: the short name of the URN ones (RFC 8693 token exchange, RFC 8628 device code). */
const grantLabel = (grant: string): string =>
  grant.startsWith('urn:')
    ? grant.replace('urn:ietf:params:oauth:grant-type:', '').replace(/[-_]/g, ' ')
    : grant;

/** The grant types checked in a client form. */
const grantsOf = (data: FormData) =>
  GRANTS.filter((g) => data.get(g) === 'on') as NewClient['allowedGrantTypes'];

/** The fields a client's create and edit forms share, filled from `record` (empty for a new one). */
function clientFields(record?: Client): Node[] {
  return [
    field('Redirect URIs', el('textarea', { name: 'redirectUris', value: record?.redirectUris.join('\n') })),
    field('Scopes', el('input', { name: 'allowedScopes', value: record && joined(record.allowedScopes) })),
    field('Permissions', el('input', { name: 'permissions', value: record && joined(record.permissions) })),
    el(
      'div',
      {},
      GRANTS.map((g) =>
        checkbox(g, grantLabel(g), record ? (record.allowedGrantTypes as string[]).includes(g) : false),
      ),
    ),
    field(
      'Post-logout redirect URIs',
      el('textarea', { name: 'postLogoutRedirectUris', value: record?.postLogoutRedirectUris.join('\n') }),
    ),
    field(
      'Back-channel logout URI',
      el('input', { name: 'backchannelLogoutUri', value: record?.backchannelLogoutUri ?? '' }),
    ),
    checkbox('requireConsent', 'Third-party (users must consent)', record?.requireConsent ?? false),
  ];
}

/** The OpenID Connect settings entered in a client form. */
function clientOidcBody(data: FormData) {
  return {
    postLogoutRedirectUris: listField(data, 'postLogoutRedirectUris'),
    backchannelLogoutUri: text(data, 'backchannelLogoutUri').trim() || null,
    requireConsent: data.get('requireConsent') === 'on',
  };
}

const clientPath = (record: Client) => ({ params: { path: { clientId: record.clientId } } });

/** The Clients view. */
export const clientsView = resourceView<Client>('clients', {
  noun: 'client(s)',
  attribute: 'client',
  key: (record) => record.clientId,
  headers: ['Client id', 'Name', 'Type', 'Status', 'Grant types', 'Scopes', 'Redirect URIs', 'Actions'],
  cells: (record) => [
    record.clientId,
    record.displayName,
    record.clientType,
    record.isEnabled ? 'enabled' : 'disabled',
    joined(record.allowedGrantTypes),
    joined(record.allowedScopes),
    joined(record.redirectUris),
  ],
  actions: (record) => [
    button(record.isEnabled ? 'Disable' : 'Enable', () =>
      act(`${record.isEnabled ? 'Disabled' : 'Enabled'} ${record.clientId}.`, () =>
        call(
          client.PATCH('/clients/{clientId}', {
            ...clientPath(record),
            body: { isEnabled: !record.isEnabled },
          }),
        ),
      ),
    ),
    record.clientType === 'confidential'
      ? button(
          'New secret',
          confirmThen(`Replace the secret of ${record.clientId}?`, () =>
            act(`New secret of ${record.clientId} (shown once): `, () =>
              call(client.POST('/clients/{clientId}/secret', clientPath(record))),
            ),
          ),
        )
      : null,
    button(
      'Delete',
      confirmThen(`Delete client ${record.clientId}?`, () =>
        act(`Deleted client ${record.clientId}.`, () =>
          call(client.DELETE('/clients/{clientId}', clientPath(record))),
        ),
      ),
      'danger',
    ),
  ],
  editor: clientEditor,
  load: (query) => call(client.GET('/clients', { params: { query } })),
  form: () =>
    card(
      { 'aria-label': 'New client' },
      'New client',
      [
        field('Client id', el('input', { name: 'clientId', required: true, maxlength: 128 })),
        field('Display name', el('input', { name: 'displayName' })),
        field(
          'Type',
          el(
            'select',
            { name: 'clientType' },
            el('option', { value: 'public', text: 'public' }),
            el('option', { value: 'confidential', text: 'confidential' }),
          ),
        ),
        ...clientFields(),
      ],
      'Create client',
      (data) => {
        const body: NewClient = {
          clientId: text(data, 'clientId'),
          displayName: text(data, 'displayName'),
          clientType: text(data, 'clientType') as NewClient['clientType'],
          redirectUris: listField(data, 'redirectUris'),
          allowedScopes: listField(data, 'allowedScopes'),
          allowedGrantTypes: grantsOf(data),
          ...clientOidcBody(data),
        };
        const permissions = listField(data, 'permissions');
        if (permissions.length) body.permissions = permissions;
        act(
          (created) =>
            created.clientSecret
              ? `Created client ${created.clientId}. Its secret (shown once): `
              : `Created client ${created.clientId}.`,
          () => call(client.POST('/clients', { body })),
        );
      },
    ),
});

function clientEditor(record: Client): Node {
  const form = card(
    { 'aria-label': `Edit client ${record.clientId}` },
    `Edit ${record.clientId}`,
    [
      field('Display name', el('input', { name: 'displayName', value: record.displayName })),
      ...clientFields(record),
    ],
    'Save client',
    (data) =>
      act(`Saved client ${record.clientId}.`, () =>
        call(
          client.PATCH('/clients/{clientId}', {
            ...clientPath(record),
            body: {
              displayName: text(data, 'displayName'),
              redirectUris: listField(data, 'redirectUris'),
              allowedScopes: listField(data, 'allowedScopes'),
              permissions: listField(data, 'permissions'),
              allowedGrantTypes: grantsOf(data),
              ...clientOidcBody(data),
            },
          }),
        ),
      ),
  );
  return el(
    'div',
    {},
    form,
    clientSettingsCard(record),
    mfaRequirement({ kind: 'client', id: record.clientId }, `client ${record.clientId}`),
  );
}
