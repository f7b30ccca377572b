/** HTML of the second-factor pages (same frame and rules as `./page.ts`: no scripts, no external assets). */
import { escapeHtml, layout } from '../oauth/page.ts';
import { PASSKEY_SCRIPTS } from './page-passkeys.ts';

function hidden(name: string, value: string | undefined): string {
  return value === undefined ? '' : `<input type="hidden" name="${name}" value="${escapeHtml(value)}">\n`;
}

/** The generic failure of the second-factor pages (the real reason is only audited). */
const FAILED = '<p class="error" role="alert">That code is not valid. Try again.</p>\n';

/**
 * The second-factor page: the code form of `POST /login/otp` (a TOTP code or a recovery code in one field)
 * and/or the "Use a passkey" button. `failed` shows the generic failure message.
 */
export function totpForm(options: {
  csrfToken: string;
  returnTo: string | undefined;
  failed: boolean;
  /** The user has a TOTP factor (the code form is shown). */
  totp: boolean;
  /** The user has passkeys (the "Use a passkey" button is shown). */
  passkey: boolean;
}): string {
  const fields = `${hidden('_csrf', options.csrfToken)}${hidden('return_to', options.returnTo)}`;
  const codeForm = options.totp
    ? `<p>Enter the 6-digit code from your authenticator app, or one of your recovery codes.</p>
<form method="post" action="/login/otp" autocomplete="off">
${fields}<label for="code">Code</label>
<input type="text" id="code" name="code" inputmode="text" autocomplete="one-time-code" required maxlength="32" autofocus>
<button type="submit">Verify</button>
</form>
`
    : fields;
  const passkey = options.passkey
    ? `<button type="button" id="passkey-signin" data-ceremony="second-factor" class="secondary">Use a passkey</button>
<p class="error" id="passkey-status" role="alert" hidden></p>
${PASSKEY_SCRIPTS}`
    : '';
  return layout(
    'Two-factor authentication',
    `<h1>Two-factor authentication</h1>
${options.failed ? FAILED : ''}${codeForm}${passkey}`,
  );
}

/** Groups a base32 seed in fours for reading and typing. */
function grouped(secret: string): string {
  return secret.replace(/(.{4})/g, '$1 ').trim();
}

/**
 * The enrolment page of `GET /login/otp/enrol`: the key URI as an inline SVG QR code (`qrSvg`, produced by
 * `qrcode` from the seed, not user input), the seed as text, and the confirmation code form.
 */
export function totpEnrolForm(options: {
  csrfToken: string;
  returnTo: string | undefined;
  failed: boolean;
  qrSvg: string;
  secret: string;
  required: boolean;
}): string {
  return layout(
    'Set up two-factor authentication',
    `<h1>Set up two-factor authentication</h1>
${options.failed ? FAILED : ''}${options.required ? '<p>Your account needs a second factor to sign in.</p>\n' : ''}<p>Scan this code with an authenticator app, or type the key below into it.</p>
<div class="qr" aria-label="QR code of the authenticator key">${options.qrSvg}</div>
<p>Key: <code id="totp-secret">${escapeHtml(grouped(options.secret))}</code></p>
<form method="post" action="/login/otp/enrol" autocomplete="off">
${hidden('_csrf', options.csrfToken)}${hidden('return_to', options.returnTo)}<label for="code">Code from the app</label>
<input type="text" id="code" name="code" inputmode="numeric" autocomplete="one-time-code" required maxlength="16" autofocus>
<button type="submit">Turn on</button>
</form>`,
  );
}

/** Shown once after enrolment: the recovery codes and where to continue. */
export function recoveryCodesPage(options: { codes: readonly string[]; continueTo: string }): string {
  const items = options.codes.map((c) => `<li><code>${escapeHtml(c)}</code></li>`).join('\n');
  return layout(
    'Recovery codes',
    `<h1>Two-factor authentication is on</h1>
<p>Keep these recovery codes somewhere safe. Each signs you in once if you lose your authenticator. They are shown only now.</p>
<ul id="recovery-codes">
${items}
</ul>
<p><a id="continue" href="${escapeHtml(options.continueTo)}">Continue</a></p>`,
  );
}

/** Shown when a second factor is required but TOTP is off on this server (no MFA key). */
export function secondFactorUnavailable(): string {
  return layout(
    'Sign-in not possible',
    `<h1>Sign-in not possible</h1>
<p>Your account needs a second factor, which this server cannot offer now. Contact your administrator.</p>
<p><a href="/login">Back to sign-in</a></p>`,
  );
}
