/** HTML of the consent page (OIDC Core §3.1.2.4): the client, the signed-in user and the scopes asked for. */
import { escapeHtml, layout } from './page.ts';

/**
 * The consent form: `POST /consent` with the CSRF field, the pending authorization request (`return_to`) and
 * `decision` = `allow` or `deny` (two submit buttons).
 */
export function consentForm(options: {
  csrfToken: string;
  returnTo: string;
  clientName: string;
  userName: string;
  scopes: readonly { scope: string; description: string }[];
}): string {
  const items = options.scopes
    .map((s) => `<li><strong>${escapeHtml(s.description)}</strong> <code>${escapeHtml(s.scope)}</code></li>`)
    .join('\n');
  return layout(
    'Allow access?',
    `<h1>Allow access?</h1>
<p><strong>${escapeHtml(options.clientName)}</strong> asks to access your account <strong>${escapeHtml(options.userName)}</strong>:</p>
<ul class="scopes">
${items}
</ul>
<form method="post" action="/consent">
<input type="hidden" name="_csrf" value="${escapeHtml(options.csrfToken)}">
<input type="hidden" name="return_to" value="${escapeHtml(options.returnTo)}">
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>`,
  );
}
