// Passkeys on the login pages (served as /login/assets/passkey.js after @simplewebauthn/browser's bundle,
// which defines window.SimpleWebAuthnBrowser). Buttons: #passkey-signin (data-ceremony "authenticate" for a
// passkey alone, "second-factor" after a password), #passkey-add (register, name from #passkey-name). A
// username field with autocomplete "webauthn" gets conditional UI (passkeys offered in the autofill list).
// Requests are form posts with the page's CSRF field; answers are JSON ({ redirect } or { error }).
(() => {
  const W = window.SimpleWebAuthnBrowser;
  if (!W) return;
  const field = (name) => document.querySelector(`input[name=${name}]`)?.value ?? '';
  const status = document.getElementById('passkey-status');
  const fail = () => {
    if (status) {
      status.textContent = 'That passkey could not be used.';
      status.hidden = false;
    }
  };
  const post = async (path, fields) => {
    const body = new URLSearchParams({ _csrf: field('_csrf'), ...fields });
    try {
      const res = await fetch(path, { method: 'POST', body, credentials: 'same-origin' });
      return { ok: res.ok, json: await res.json().catch(() => ({})) };
    } catch {
      return { ok: false, json: {} };
    }
  };
  const finish = async (ceremony, response, extra) => {
    const done = await post('/login/passkey/verify', {
      ceremony,
      response: JSON.stringify(response),
      return_to: field('return_to'),
      ...extra,
    });
    if (done.ok && typeof done.json.redirect === 'string') location.assign(done.json.redirect);
    else fail();
  };
  const authenticate = async (ceremony, autofill) => {
    const options = await post('/login/passkey/options', { ceremony });
    if (!options.ok) return autofill ? undefined : fail();
    let response;
    try {
      response = await W.startAuthentication({ optionsJSON: options.json, useBrowserAutofill: autofill });
    } catch {
      return autofill ? undefined : fail();
    }
    await finish(ceremony, response, {});
  };
  const register = async () => {
    const options = await post('/login/passkey/options', { ceremony: 'register' });
    if (!options.ok) return fail();
    let response;
    try {
      response = await W.startRegistration({ optionsJSON: options.json });
    } catch {
      return fail();
    }
    await finish('register', response, { name: document.getElementById('passkey-name')?.value ?? '' });
  };
  const signin = document.getElementById('passkey-signin');
  signin?.addEventListener('click', () => authenticate(signin.dataset.ceremony || 'authenticate', false));
  document.getElementById('passkey-add')?.addEventListener('click', register);
  if (document.querySelector('input[autocomplete~="webauthn"]'))
    W.browserSupportsWebAuthnAutofill().then((yes) => yes && authenticate('authenticate', true));
})();
