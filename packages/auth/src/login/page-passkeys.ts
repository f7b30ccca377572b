/** HTML of the passkey management page (`GET /login/passkeys`); scripts only from this server. */

import { escapeHtml, layout } from '../oauth/page.ts';
import type { PasskeyRecord } from '../store/passkeys.ts';

/** The script tags of a page that uses passkeys (`@simplewebauthn/browser`'s bundle, then `./web/passkey.js`). */
export const PASSKEY_SCRIPTS =
  '<script src="/login/assets/webauthn.js"></script>\n<script src="/login/assets/passkey.js"></script>';

/** The "Sign in with a passkey" button of the login page (a passkey alone) and its scripts. */
export function passkeySignIn(): string {
  return `
<button type="button" id="passkey-signin" data-ceremony="authenticate" class="secondary">Sign in with a passkey</button>
<p class="error" id="passkey-status" role="alert" hidden></p>
${PASSKEY_SCRIPTS}`;
}

/** The signed-in user's passkeys with rename and remove forms, and the button that adds one. */
export function passkeysPage(options: {
  csrfToken: string;
  userName: string;
  passkeys: readonly PasskeyRecord[];
  /** False when passkeys are off (no MFA key): the list is shown, adding is not offered. */
  enabled: boolean;
  failed: boolean;
}): string {
  const csrf = `<input type="hidden" name="_csrf" value="${escapeHtml(options.csrfToken)}">`;
  const rows = options.passkeys
    .map((p) => {
      const id = `<input type="hidden" name="id" value="${escapeHtml(p.id)}">`;
      const used = p.lastUsedAt === null ? 'never used' : `last used ${new Date(p.lastUsedAt).toISOString()}`;
      return `<li class="passkey" data-id="${escapeHtml(p.id)}"><strong>${escapeHtml(p.name)}</strong> <small>${p.backedUp ? 'synced' : 'this device'}, ${used}</small>
<form method="post" action="/login/passkeys/rename">${csrf}${id}<input type="text" name="name" aria-label="New name" required maxlength="64" value="${escapeHtml(p.name)}"><button type="submit" class="secondary">Rename</button></form>
<form method="post" action="/login/passkeys/remove">${csrf}${id}<button type="submit" class="secondary">Remove</button></form></li>`;
    })
    .join('\n');
  const add = options.enabled
    ? `<label for="passkey-name">Name of a new passkey</label>
<input type="text" id="passkey-name" maxlength="64" value="Passkey">
<button type="button" id="passkey-add">Add a passkey</button>
<p class="error" id="passkey-status" role="alert" hidden></p>
${PASSKEY_SCRIPTS}`
    : '';
  return layout(
    'Passkeys',
    `<h1>Passkeys</h1>
<p>Signed in as <strong>${escapeHtml(options.userName)}</strong>.</p>
${options.failed ? '<p class="error" role="alert">That change was not possible.</p>\n' : ''}${csrf}
<ul id="passkeys">
${rows || '<li>No passkeys yet.</li>'}
</ul>
${add}
<p><a href="/login">Back</a></p>`,
  );
}
