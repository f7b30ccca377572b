/** HTML of the self-service pages: forgotten password, reset, e-mail verification and the account page. */

import { escapeHtml, layout } from '../oauth/page.ts';
import type { AccountSession } from '../store/account.ts';
import type { UserAddress } from '../store/types.ts';

const csrfField = (token: string) => `<input type="hidden" name="_csrf" value="${escapeHtml(token)}">`;

/** A new password and its repetition (fields `password`, `password2`), as registration and reset ask. */
const newPasswordFields = (label: string, autofocus: boolean) =>
  `<label for="password">${label}</label>
<input type="password" id="password" name="password" autocomplete="new-password" required minlength="8" maxlength="1024"${autofocus ? ' autofocus' : ''}>
<label for="password2">Repeat it</label>
<input type="password" id="password2" name="password2" autocomplete="new-password" required minlength="8" maxlength="1024">`;

/** `GET /login/forgot`: user name or e-mail address. */
export function forgotForm(options: { csrfToken: string }): string {
  return layout(
    'Forgot password',
    `<h1>Forgot your password?</h1>
<p>Enter your user name or e-mail address. If the account has an e-mail address, a link to set a new password is sent to it.</p>
<form method="post" action="/login/forgot">
${csrfField(options.csrfToken)}<label for="account">User name or e-mail</label>
<input type="text" id="account" name="account" required maxlength="256" autofocus>
<button type="submit">Send link</button>
</form>`,
  );
}

/** `GET /login/register`: self-registration (when turned on). `error` names the rule that failed. */
export function registerForm(options: { csrfToken: string; error: string | undefined }): string {
  return layout(
    'Create an account',
    `<h1>Create an account</h1>
${options.error ? `<p class="error" role="alert">${escapeHtml(options.error)}</p>\n` : ''}<form method="post" action="/login/register">
${csrfField(options.csrfToken)}<label for="username">User name</label>
<input type="text" id="username" name="username" autocomplete="username" required maxlength="64" autofocus>
<label for="email">E-mail</label>
<input type="email" id="email" name="email" autocomplete="email" required maxlength="254">
${newPasswordFields('Password', false)}
<button type="submit">Create account</button>
</form>`,
  );
}

/** The answer to every reset request (whether or not an account matched). */
export function forgotSent(): string {
  return layout(
    'Check your e-mail',
    `<h1>Check your e-mail</h1>
<p id="forgot-sent">If an account matches, a link to set a new password has been sent to its e-mail address. The link works once.</p>
<p><a href="/login">Back to sign-in</a></p>`,
  );
}

/** `GET /login/reset`: the new-password form for a link token. */
export function resetForm(options: { csrfToken: string; token: string; failed: boolean }): string {
  return layout(
    'Set a new password',
    `<h1>Set a new password</h1>
${options.failed ? '<p class="error" role="alert">The passwords must match and have at least 8 characters.</p>\n' : ''}<form method="post" action="/login/reset">
${csrfField(options.csrfToken)}<input type="hidden" name="token" value="${escapeHtml(options.token)}">
${newPasswordFields('New password', true)}
<button type="submit">Set password</button>
</form>`,
  );
}

/** The one failure page of every link (unknown, expired, used): the reason is only audited. */
export function linkInvalid(): string {
  return layout(
    'Link not valid',
    `<h1>Link not valid</h1>
<p id="link-invalid">This link is not valid or has expired.</p>
<p><a href="/login/forgot">Ask for a new link</a> · <a href="/login">Sign in</a></p>`,
  );
}

/** A short confirmation with a link onwards. */
export function done(title: string, text: string, href: string, linkText: string): string {
  return layout(
    title,
    `<h1>${escapeHtml(title)}</h1>
<p id="done">${escapeHtml(text)}</p>
<p><a href="${escapeHtml(href)}">${escapeHtml(linkText)}</a></p>`,
  );
}

/**
 * The address fields of the account page's contact form: form field, {@link UserAddress} member, label
 * (OIDC Core §5.1.1 members; `formatted` is left to administrators).
 */
export const ADDRESS_FORM_FIELDS = [
  ['street_address', 'streetAddress', 'Street address'],
  ['locality', 'locality', 'City'],
  ['region', 'region', 'Region'],
  ['postal_code', 'postalCode', 'Postal code'],
  ['country', 'country', 'Country'],
] as const;

/** What the account page shows. */
export interface AccountView {
  readonly csrfToken: string;
  readonly userName: string;
  readonly email: string | null;
  readonly emailVerified: boolean;
  readonly phoneNumber: string | null;
  readonly phoneNumberVerified: boolean;
  readonly address: UserAddress | null;
  /** Self-service mail is on (verification can be sent). */
  readonly mail: boolean;
  readonly totp: boolean;
  /** Two-factor sign-in is on (TOTP and passkeys can be set up). */
  readonly mfa: boolean;
  readonly passkeys: number;
  readonly sessions: readonly AccountSession[];
  readonly currentSid: string | null;
  readonly links: readonly { providerId: string; email: string | null }[];
  readonly notice: string | undefined;
  readonly failed: boolean;
}

/** `GET /login/account`: password, e-mail verification, factors, sessions, linked providers. */
export function accountPage(v: AccountView): string {
  const csrf = csrfField(v.csrfToken);
  const email =
    v.email === null
      ? '<p>No e-mail address.</p>'
      : `<p>E-mail: <span id="email">${escapeHtml(v.email)}</span> <small id="email-state">${v.emailVerified ? 'verified' : 'not verified'}</small></p>${
          !v.emailVerified && v.mail
            ? `\n<form method="post" action="/login/account/verify-email">${csrf}<button type="submit" class="secondary" id="verify-email">Send verification link</button></form>`
            : ''
        }`;
  const totp = !v.mfa
    ? ''
    : v.totp
      ? `<p>Authenticator app: on.</p><form method="post" action="/login/account/totp/remove">${csrf}<button type="submit" class="secondary" id="totp-remove">Turn off</button></form>`
      : '<p>Authenticator app: off. <a id="totp-enrol" href="/login/otp/enrol">Set up</a></p>';
  const passkeys = v.mfa
    ? `<p>Passkeys: ${v.passkeys}. <a id="passkeys" href="/login/passkeys">Manage</a></p>`
    : '';
  const sessions = v.sessions
    .map(
      (s) =>
        `<li class="session" data-sid="${escapeHtml(s.sid)}">${new Date(s.createdAt).toISOString()} (${escapeHtml(s.amr.join(' '))})${
          s.sid === v.currentSid ? ' <strong>this browser</strong>' : ''
        }<form method="post" action="/login/account/sessions/end">${csrf}<input type="hidden" name="sid" value="${escapeHtml(s.sid)}"><button type="submit" class="secondary">End</button></form></li>`,
    )
    .join('\n');
  const links = v.links.length
    ? `<ul id="links">${v.links.map((l) => `<li>${escapeHtml(l.providerId)}${l.email ? ` (${escapeHtml(l.email)})` : ''}</li>`).join('')}</ul>`
    : '<p>No linked providers.</p>';
  return layout(
    'Your account',
    `<h1>Your account</h1>
${v.notice ? `<p id="notice">${escapeHtml(v.notice)}</p>\n` : ''}${v.failed ? '<p class="error" role="alert">That change was not possible.</p>\n' : ''}<p>Signed in as <strong>${escapeHtml(v.userName)}</strong>.</p>
${email}
<h2>Contact details</h2>
<form method="post" action="/login/account/contact">
${csrf}<label for="phone_number">Telephone (E.164, e.g. +4930123456)${v.phoneNumber !== null ? ` <small id="phone-state">${v.phoneNumberVerified ? 'verified' : 'not verified'}</small>` : ''}</label>
<input type="tel" id="phone_number" name="phone_number" autocomplete="tel" maxlength="32" value="${escapeHtml(v.phoneNumber ?? '')}">
${ADDRESS_FORM_FIELDS.map(([field, member, label]) => {
  const value = escapeHtml(v.address?.[member] ?? '');
  return member === 'streetAddress'
    ? `<label for="${field}">${label}</label>\n<textarea id="${field}" name="${field}" autocomplete="street-address" maxlength="256" rows="2">${value}</textarea>`
    : `<label for="${field}">${label}</label>\n<input id="${field}" name="${field}" maxlength="256" value="${value}">`;
}).join('\n')}
<button type="submit" id="save-contact">Save contact details</button>
</form>
<h2>Password</h2>
<form method="post" action="/login/account/password">
${csrf}<label for="current">Current password</label>
<input type="password" id="current" name="current" autocomplete="current-password" required maxlength="1024">
<label for="password">New password</label>
<input type="password" id="password" name="password" autocomplete="new-password" required minlength="8" maxlength="1024">
<label for="password2">Repeat it</label>
<input type="password" id="password2" name="password2" autocomplete="new-password" required minlength="8" maxlength="1024">
<button type="submit" id="change-password">Change password</button>
</form>
<h2>Two-factor authentication</h2>
${totp}
${passkeys}
<h2>Sessions</h2>
<ul id="sessions">
${sessions}
</ul>
<h2>Linked providers</h2>
${links}`,
  );
}
