/**
 * The Users view: the list with Enable/Disable, Unlock and Delete, the editor (profile, roles, permissions,
 * password, second factors, consents) and the "New user" form.
 */
import { call, client, type paths } from './api.ts';
import { button, card, checkbox, el, field, joined, listField, table, text, when } from './dom.ts';
import { resourceView } from './resource-view.ts';
import { act, confirmThen } from './shell.ts';
import { factorsOf } from './user-factors.ts';

/** A user as the API lists it. */
export type User = paths['/users/{id}']['get']['responses'][200]['content']['application/json'];
type NewUser = NonNullable<paths['/users']['post']['requestBody']>['content']['application/json'];

const userPath = (user: User) => ({ params: { path: { id: user.id } } });

/** The Users view. */
export const usersView = resourceView<User>('users', {
  noun: 'user(s)',
  attribute: 'user',
  key: (user) => user.userName,
  headers: ['User name', 'Status', 'Lockout', 'Roles', 'Direct permissions', 'Actions'],
  cells: (user) => [
    user.userName,
    user.isEnabled ? 'enabled' : 'disabled',
    user.isLockedOut ? `locked until ${when(user.lockoutEnd)}` : '',
    joined(user.roles),
    joined(user.directPermissions),
  ],
  actions: (user) => [
    user.isEnabled
      ? button('Disable', () =>
          act(`Disabled ${user.userName}.`, () => call(client.POST('/users/{id}/disable', userPath(user)))),
        )
      : button('Enable', () =>
          act(`Enabled ${user.userName}.`, () => call(client.POST('/users/{id}/enable', userPath(user)))),
        ),
    user.isLockedOut
      ? button('Unlock', () =>
          act(`Unlocked ${user.userName}.`, () => call(client.POST('/users/{id}/unlock', userPath(user)))),
        )
      : null,
    button(
      'Delete',
      confirmThen(`Delete user ${user.userName}?`, () =>
        act(`Deleted ${user.userName}.`, () => call(client.DELETE('/users/{id}', userPath(user)))),
      ),
      'danger',
    ),
  ],
  editor: userEditor,
  load: (query) => call(client.GET('/users', { params: { query } })),
  form: () =>
    card(
      { id: 'new-user', 'aria-label': 'New user' },
      'New user',
      [
        field('User name', el('input', { name: 'userName', required: true, maxlength: 256 })),
        field(
          'Password',
          el('input', { name: 'password', type: 'password', autocomplete: 'new-password', maxlength: 1024 }),
        ),
        field('Roles (comma-separated)', el('input', { name: 'roles' })),
      ],
      'Create user',
      (data) => {
        const body: NewUser = { userName: text(data, 'userName') };
        if (text(data, 'password')) body.password = text(data, 'password');
        const roles = listField(data, 'roles');
        if (roles.length) body.roles = roles;
        act(
          (user) => `Created user ${user.userName}.`,
          () => call(client.POST('/users', { body })),
        );
      },
    ),
});

/** A profile field's value: blank clears it (null). */
const optional = (data: FormData, name: string): string | null => text(data, name).trim() || null;

/** A user's postal address (OIDC Core §5.1.1 members), as the API takes and lists it. */
type Address = NonNullable<User['address']>;

/** The address members the editor shows, with their labels. */
const ADDRESS_FIELDS: [keyof Address, string][] = [
  ['streetAddress', 'Street address'],
  ['locality', 'Locality (city)'],
  ['region', 'Region'],
  ['postalCode', 'Postal code'],
  ['country', 'Country'],
  ['formatted', 'Formatted address'],
];

/** The address of the editor's fields: the non-blank members, or null (cleared) when all are blank. */
function addressOf(data: FormData): Address | null {
  const address: Address = {};
  for (const [name] of ADDRESS_FIELDS) {
    const value = text(data, `address.${name}`).trim();
    if (value) address[name] = value;
  }
  return Object.keys(address).length > 0 ? address : null;
}

function userEditor(user: User): Node {
  const form = card(
    { 'aria-label': `Edit user ${user.userName}` },
    `Edit ${user.userName}`,
    [
      field('User name', el('input', { name: 'userName', value: user.userName, required: true })),
      field('Roles', el('input', { name: 'roles', value: joined(user.roles) })),
      field(
        'Direct permissions',
        el('input', { name: 'directPermissions', value: joined(user.directPermissions) }),
      ),
      field(
        'Denied permissions',
        el('input', { name: 'deniedPermissions', value: joined(user.deniedPermissions) }),
      ),
      field('Display name', el('input', { name: 'displayName', value: user.displayName ?? '' })),
      field('Given name', el('input', { name: 'givenName', value: user.givenName ?? '' })),
      field('Family name', el('input', { name: 'familyName', value: user.familyName ?? '' })),
      field('E-mail', el('input', { name: 'email', type: 'email', value: user.email ?? '' })),
      checkbox('emailVerified', 'E-mail verified', user.emailVerified),
      field(
        'Phone number (E.164, e.g. +15551234567)',
        el('input', { name: 'phoneNumber', type: 'tel', value: user.phoneNumber ?? '' }),
      ),
      checkbox('phoneNumberVerified', 'Phone number verified', user.phoneNumberVerified),
      ...ADDRESS_FIELDS.map(([name, label]) =>
        field(label, el('input', { name: `address.${name}`, value: user.address?.[name] ?? '' })),
      ),
    ],
    'Save user',
    (data) =>
      act(`Saved ${text(data, 'userName')}.`, () =>
        call(
          client.PATCH('/users/{id}', {
            ...userPath(user),
            body: {
              userName: text(data, 'userName'),
              roles: listField(data, 'roles'),
              directPermissions: listField(data, 'directPermissions'),
              deniedPermissions: listField(data, 'deniedPermissions'),
              displayName: optional(data, 'displayName'),
              givenName: optional(data, 'givenName'),
              familyName: optional(data, 'familyName'),
              email: optional(data, 'email'),
              emailVerified: data.get('emailVerified') === 'on',
              phoneNumber: optional(data, 'phoneNumber'),
              phoneNumberVerified: data.get('phoneNumberVerified') === 'on',
              address: addressOf(data),
            },
          }),
        ),
      ),
  );
  const password = card(
    { 'aria-label': `Set password of ${user.userName}` },
    `Set password of ${user.userName}`,
    [
      field(
        'New password',
        el('input', { name: 'password', type: 'password', autocomplete: 'new-password', required: true }),
      ),
    ],
    'Set password',
    (data) =>
      act(`Password of ${user.userName} set; their sessions end.`, () =>
        call(
          client.PUT('/users/{id}/password', {
            ...userPath(user),
            body: { password: text(data, 'password') },
          }),
        ),
      ),
  );
  return el('div', {}, form, password, factorsOf(user), consentsOf(user));
}

/** The clients `user` consented to (third-party clients), each with a Revoke button; filled when loaded. */
function consentsOf(user: User): HTMLElement {
  const box = el(
    'section',
    { class: 'card', 'aria-label': `Consents of ${user.userName}` },
    el('h2', { text: `Consents of ${user.userName}` }),
  );
  call(client.GET('/users/{id}/consents', userPath(user)))
    .then((page) => {
      if (page.items.length === 0) {
        box.append(el('p', { text: 'No consents.' }));
        return;
      }
      const rows = page.items.map((c) =>
        el(
          'tr',
          { 'data-consent': c.clientId },
          el('td', { text: c.clientId }),
          el('td', { text: joined(c.scopes) }),
          el('td', { text: when(c.updatedAt) }),
          el(
            'td',
            { class: 'actions' },
            button(
              'Revoke',
              confirmThen(`Revoke the consent of ${user.userName} to ${c.clientId}?`, () =>
                act(`Revoked the consent to ${c.clientId}.`, () =>
                  call(
                    client.DELETE('/users/{id}/consents/{clientId}', {
                      params: { path: { id: user.id, clientId: c.clientId } },
                    }),
                  ),
                ),
              ),
              'danger',
            ),
          ),
        ),
      );
      box.append(table(['Client', 'Scopes', 'Given', 'Actions'], rows));
    })
    .catch((error: Error) => box.append(el('p', { class: 'error', text: error.message })));
  return box;
}
