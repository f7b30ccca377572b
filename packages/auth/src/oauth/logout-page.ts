/** HTML of the logout pages (OpenID Connect RP-Initiated Logout 1.0): the confirmation and "signed out". */
import { escapeHtml, layout } from './page.ts';

/**
 * Asks the signed-in user to confirm signing out: `POST /connect/endsession/confirm` with the CSRF field and
 * the validated request parameters as hidden fields (absent ones left out).
 */
export function logoutConfirm(options: {
  csrfToken: string;
  userName: string;
  clientName: string | undefined;
  fields: Record<string, string | undefined>;
}): string {
  const hidden = Object.entries(options.fields)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n');
  const from = options.clientName ? ` (requested by <strong>${escapeHtml(options.clientName)}</strong>)` : '';
  return layout(
    'Sign out?',
    `<h1>Sign out?</h1>
<p>Sign out <strong>${escapeHtml(options.userName)}</strong>${from}?</p>
<form method="post" action="/connect/endsession/confirm">
<input type="hidden" name="_csrf" value="${escapeHtml(options.csrfToken)}">
${hidden}
<button type="submit">Sign out</button>
</form>`,
  );
}

/** Shown after a logout that has no `post_logout_redirect_uri`. */
export function signedOut(): string {
  return layout(
    'Signed out',
    '<h1>Signed out</h1>\n<p>You are signed out.</p>\n<p><a href="/login">Sign in again</a></p>',
  );
}
