/**
 * The second factors of a user on the admin page (TOTP, recovery codes left, passkeys) with Remove buttons,
 * and whether an administrator requires two factors for the user (a toggle).
 */
import { call, client, type paths } from './api.ts';
import { button, el, table, when } from './dom.ts';
import { act, confirmThen } from './shell.ts';

type User = paths['/users/{id}']['get']['responses'][200]['content']['application/json'];

/** The "Second factors of {user}" card; filled when loaded. */
export function factorsOf(user: User): HTMLElement {
  const box = el(
    'section',
    { class: 'card', 'aria-label': `Second factors of ${user.userName}` },
    el('h2', { text: `Second factors of ${user.userName}` }),
  );
  const path = { params: { path: { id: user.id } } };
  Promise.all([call(client.GET('/users/{id}/factors', path)), call(client.GET('/users/{id}/passkeys', path))])
    .then(([factors, passkeys]) => {
      const totp = factors.totpEnrolledAt
        ? el(
            'p',
            { 'data-factor': 'totp' },
            `Authenticator app since ${when(factors.totpEnrolledAt)}; ${factors.recoveryCodesLeft} recovery code(s) left. `,
            button(
              'Remove TOTP',
              confirmThen(`Remove the authenticator app of ${user.userName}?`, () =>
                act(`Removed the authenticator app of ${user.userName}.`, () =>
                  call(client.DELETE('/users/{id}/factors/totp', path)),
                ),
              ),
              'danger',
            ),
          )
        : el('p', { 'data-factor': 'totp', text: 'No authenticator app.' });
      const rows = passkeys.items.map((p) =>
        el(
          'tr',
          { 'data-passkey': p.id },
          el('td', { text: p.name }),
          el('td', { text: p.backedUp ? 'synced' : 'this device' }),
          el('td', { text: p.lastUsedAt ? when(p.lastUsedAt) : 'never' }),
          el(
            'td',
            { class: 'actions' },
            button(
              'Remove',
              confirmThen(`Remove the passkey ${p.name} of ${user.userName}?`, () =>
                act(`Removed the passkey ${p.name}.`, () =>
                  call(
                    client.DELETE('/users/{id}/passkeys/{credentialId}', {
                      params: { path: { id: user.id, credentialId: p.id } },
                    }),
                  ),
                ),
              ),
              'danger',
            ),
          ),
        ),
      );
      const required = factors.mfaRequired;
      box.append(
        totp,
        rows.length
          ? table(['Passkey', 'Kind', 'Last used', 'Actions'], rows)
          : el('p', { text: 'No passkeys.' }),
        el(
          'p',
          {},
          required ? 'Two factors are required (for the user or one of its roles). ' : '',
          button(required ? 'Stop requiring two factors' : 'Require two factors', () =>
            act(required ? 'Two factors no longer required for the user.' : 'Two factors required.', () =>
              call(
                required
                  ? client.DELETE('/users/{id}/mfa-required', path)
                  : client.PUT('/users/{id}/mfa-required', path),
              ),
            ),
          ),
        ),
      );
    })
    .catch((error: Error) => box.append(el('p', { class: 'error', text: error.message })));
  return box;
}
