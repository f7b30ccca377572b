/**
 * HTML of the login page: one self-contained document (inline CSS, no external assets; with passkeys on,
 * the two passkey scripts served by this server).
 */

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const STYLE = `
body{font-family:system-ui,sans-serif;background:#f4f5f7;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center}
main{background:#fff;padding:2rem 2.5rem;border-radius:8px;box-shadow:0 2px 12px rgba(0,0,0,.1);width:20rem}
h1{font-size:1.3rem;margin:0 0 1rem}
label{display:block;margin:.8rem 0 .3rem;font-size:.9rem}
input[type=text],input[type=password]{width:100%;box-sizing:border-box;padding:.5rem;border:1px solid #bbb;border-radius:4px;font-size:1rem}
button{margin-top:1.2rem;width:100%;padding:.6rem;border:0;border-radius:4px;background:#2456c9;color:#fff;font-size:1rem;cursor:pointer}
p.error{color:#a40000;background:#fdecec;padding:.5rem;border-radius:4px;font-size:.9rem}
button.secondary{background:#e4e6eb;color:#222}
a.button{display:block;box-sizing:border-box;margin-top:.8rem;padding:.6rem;border-radius:4px;text-align:center;text-decoration:none;font-size:1rem}
a.button.secondary{background:#e4e6eb;color:#222}
ul.scopes{padding-left:1.2rem}ul.scopes li{margin:.3rem 0}ul.scopes code{color:#666;font-size:.8rem}
`;

/** A whole page: `title` (escaped) and `body` (HTML, already escaped by the caller) in the shared frame. */
export function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`;
}

/** The sign-in form. `failed` shows the generic failure message (the real reason is only audited). */
export function loginForm(options: {
  csrfToken: string;
  returnTo: string | undefined;
  failed: boolean;
  /** Pre-filled user name (OIDC `login_hint`). */
  userName?: string;
  /** HTML after the form (the upstream providers' buttons, already escaped). */
  after?: string;
  /** Passkeys are on: the user-name field offers them in its autofill list (WebAuthn conditional UI). */
  passkeys?: boolean;
}): string {
  const error = options.failed ? '<p class="error" role="alert">Invalid user name or password.</p>\n' : '';
  const returnTo =
    options.returnTo === undefined
      ? ''
      : `<input type="hidden" name="return_to" value="${escapeHtml(options.returnTo)}">\n`;
  return layout(
    'Sign in',
    `<h1>Sign in</h1>
${error}<form method="post" action="/login" autocomplete="on">
<input type="hidden" name="_csrf" value="${escapeHtml(options.csrfToken)}">
${returnTo}<label for="username">User name</label>
<input type="text" id="username" name="username" autocomplete="${options.passkeys ? 'username webauthn' : 'username'}" required maxlength="256"${options.userName ? ` value="${escapeHtml(options.userName)}"` : ' autofocus'}>
<label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required maxlength="1024"${options.userName ? ' autofocus' : ''}>
<button type="submit">Sign in</button>
</form>${options.after ?? ''}`,
  );
}

/** Shown at `/login` to a user who is already signed in and has nowhere to return to. */
export function signedIn(options: { userName: string; csrfToken: string }): string {
  return layout(
    'Signed in',
    `<h1>Signed in</h1>
<p>You are signed in as <strong>${escapeHtml(options.userName)}</strong>.</p>
<p><a id="account" href="/login/account">Your account</a></p>
<form method="post" action="/logout">
<input type="hidden" name="_csrf" value="${escapeHtml(options.csrfToken)}">
<button type="submit">Sign out</button>
</form>`,
  );
}
