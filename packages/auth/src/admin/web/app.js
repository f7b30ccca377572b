// Admin page of the auth service (spec 001). Plain ES module, no build step, no external assets.
// Sign-in: the server's own OAuth 2.0 authorization-code flow with PKCE S256 (RFC 6749 §4.1, RFC 7636) as a
// public client; the access token is kept in sessionStorage and sent as a bearer token to `{BasePath}/api`.
// All record data is written with textContent (never innerHTML): names come from other administrators.

import { clientSettingsCard } from './client-settings.js';

const html = document.documentElement;
const BASE = html.dataset.basePath;
const CLIENT_ID = html.dataset.clientId;
const SCOPE = html.dataset.scope;
/** The grant types a client may be allowed, space-separated by the server (its `GRANT_TYPES`). */
const GRANTS = html.dataset.grantTypes.split(' ').filter(Boolean);
const API = `${BASE}/api`;
const REDIRECT_URI = `${location.origin}${BASE}/`;
const TOKENS_KEY = 'seed-auth-admin.tokens';
const PKCE_KEY = 'seed-auth-admin.pkce';
const PAGE = 50;

// ── small DOM helpers ──

/** Creates an element; `props` may hold attributes, `text`, `on<Event>` handlers; children are nodes or text. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2).toLowerCase(), value);
    else if (key === 'value') node.value = value;
    else if (key === 'checked') node.checked = Boolean(value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);

function status(message, kind = 'ok', secret) {
  const box = $('status');
  box.replaceChildren();
  if (!message) return;
  box.append(
    el(
      'p',
      { class: kind, role: kind === 'error' ? 'alert' : undefined },
      message,
      secret ? el('code', { text: secret }) : null,
    ),
  );
}

const list = (text) =>
  text
    .split(/[\s,]+/)
    .map((s) => s.trim())
    .filter(Boolean);
const joined = (items) => (items ?? []).join(', ');
const when = (iso) => (iso ? new Date(iso).toLocaleString() : '');

function field(label, input) {
  return el('label', {}, label, input);
}

// ── OAuth 2.0 authorization code + PKCE ──

function base64url(bytes) {
  let s = '';
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}
const randomToken = () => base64url(crypto.getRandomValues(new Uint8Array(32)));
async function s256(verifier) {
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

let endpoints;
async function discover() {
  if (endpoints) return endpoints;
  endpoints = {
    issuer: undefined,
    authorize: '/connect/authorize',
    token: '/connect/token',
    revoke: '/connect/revocation',
    endSession: '/connect/endsession',
  };
  try {
    const res = await fetch('/.well-known/openid-configuration');
    if (res.ok) {
      const meta = await res.json();
      // Same origin as this page (the redirect URI is registered for it).
      const path = (url, fallback) => (url ? new URL(url).pathname : fallback);
      endpoints = {
        issuer: meta.issuer,
        authorize: path(meta.authorization_endpoint, endpoints.authorize),
        token: path(meta.token_endpoint, endpoints.token),
        revoke: path(meta.revocation_endpoint, endpoints.revoke),
        endSession: path(meta.end_session_endpoint, endpoints.endSession),
      };
    }
  } catch {
    // keep the defaults
  }
  return endpoints;
}

async function signIn() {
  const { authorize } = await discover();
  const verifier = randomToken();
  const state = randomToken();
  sessionStorage.setItem(PKCE_KEY, JSON.stringify({ verifier, state }));
  const params = new URLSearchParams({
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    scope: SCOPE,
    state,
    code_challenge: await s256(verifier),
    code_challenge_method: 'S256',
  });
  location.assign(`${authorize}?${params}`);
}

function saveTokens(body) {
  const previous = tokens();
  const saved = {
    accessToken: body.access_token,
    refreshToken: body.refresh_token ?? null,
    idToken: body.id_token ?? previous?.idToken ?? null,
    expiresAt: Date.now() + (Number(body.expires_in) || 300) * 1000,
  };
  sessionStorage.setItem(TOKENS_KEY, JSON.stringify(saved));
  return saved;
}

function tokens() {
  try {
    return JSON.parse(sessionStorage.getItem(TOKENS_KEY) ?? 'null');
  } catch {
    return null;
  }
}

async function tokenRequest(form) {
  const { token } = await discover();
  const res = await fetch(token, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ client_id: CLIENT_ID, ...form }),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok)
    throw new Error(`${body.error ?? res.status}: ${body.error_description ?? 'token request failed'}`);
  return saveTokens(body);
}

/** Completes the flow when the authorization server redirected back here with `code` (or `error`). */
async function handleCallback() {
  const params = new URLSearchParams(location.search);
  if (!params.has('code') && !params.has('error')) return;
  history.replaceState(null, '', REDIRECT_URI);
  const pending = JSON.parse(sessionStorage.getItem(PKCE_KEY) ?? 'null');
  sessionStorage.removeItem(PKCE_KEY);
  if (params.has('error')) {
    status(`Sign-in failed: ${params.get('error')} ${params.get('error_description') ?? ''}`, 'error');
    return;
  }
  if (!pending || params.get('state') !== pending.state) {
    status('Sign-in failed: the answer does not belong to a sign-in started here (state mismatch).', 'error');
    return;
  }
  const { issuer } = await discover();
  if (params.has('iss') && issuer && params.get('iss') !== issuer) {
    // RFC 9207 §2.4: an answer from another authorization server (mix-up attack) is refused.
    status('Sign-in failed: the answer comes from another authorization server (iss mismatch).', 'error');
    return;
  }
  try {
    await tokenRequest({
      grant_type: 'authorization_code',
      code: params.get('code'),
      redirect_uri: REDIRECT_URI,
      code_verifier: pending.verifier,
    });
  } catch (error) {
    status(`Sign-in failed: ${error.message}`, 'error');
  }
}

async function signOut() {
  const current = tokens();
  sessionStorage.removeItem(TOKENS_KEY);
  if (current?.refreshToken) {
    const { revoke } = await discover();
    await fetch(revoke, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        client_id: CLIENT_ID,
        token: current.refreshToken,
        token_type_hint: 'refresh_token',
      }),
    }).catch(() => undefined);
  }
  // RP-initiated logout (OpenID Connect RP-Initiated Logout 1.0): ends the login page's session too, then
  // the server sends the browser back here.
  const { endSession } = await discover();
  const params = new URLSearchParams({ client_id: CLIENT_ID, post_logout_redirect_uri: REDIRECT_URI });
  if (current?.idToken) params.set('id_token_hint', current.idToken);
  location.assign(`${endSession}?${params}`);
}

// ── API calls ──

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** Calls the administration API; refreshes the access token once on 401; throws ApiError with the API's message. */
async function api(method, path, body) {
  const send = (t) =>
    fetch(`${API}/${path}`, {
      method,
      headers: {
        authorization: `Bearer ${t.accessToken}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  let current = tokens();
  if (!current) throw new ApiError(401, 'not signed in');
  let res = await send(current);
  if (res.status === 401 && current.refreshToken) {
    try {
      current = await tokenRequest({ grant_type: 'refresh_token', refresh_token: current.refreshToken });
      res = await send(current);
    } catch {
      // fall through with the 401
    }
  }
  if (res.status === 204) return null;
  const data = await res.json().catch(() => ({}));
  if (res.status === 401) {
    sessionStorage.removeItem(TOKENS_KEY);
    render();
    throw new ApiError(401, 'Your session ended; sign in again.');
  }
  if (!res.ok) {
    const message = data.error_description
      ? `${data.error}: ${data.error_description} (${data.permission ?? ''})`
      : data.error;
    throw new ApiError(res.status, message ?? `HTTP ${res.status}`);
  }
  return data;
}

/** Runs an action, shows its success message or the API's error; re-renders the current view on success. */
async function act(message, fn) {
  try {
    const result = await fn();
    status(typeof message === 'function' ? message(result) : message, 'ok', result?.clientSecret);
    await show(currentView);
    return true;
  } catch (error) {
    status(error.message, 'error');
    return false;
  }
}

function confirmThen(question, fn) {
  return () => {
    if (confirm(question)) fn();
  };
}

// ── views ──

let currentView = 'users';

async function show(name) {
  currentView = name;
  for (const button of document.querySelectorAll('nav button')) {
    if (button.dataset.view === name) button.setAttribute('aria-current', 'page');
    else button.removeAttribute('aria-current');
  }
  const view = $('view');
  try {
    view.replaceChildren(await views[name]());
  } catch (error) {
    view.replaceChildren(el('p', { class: 'error', text: error.message }));
  }
}

function table(headers, rows) {
  return el(
    'table',
    {},
    el(
      'thead',
      {},
      el(
        'tr',
        {},
        headers.map((h) => el('th', { scope: 'col', text: h })),
      ),
    ),
    el('tbody', {}, rows),
  );
}

function checkbox(name, label, checked) {
  return el('label', { class: 'inline' }, el('input', { type: 'checkbox', name, checked }), label);
}

/** A plain button (`kind`: CSS class `secondary` or `danger`). */
function button(text, onclick, kind = 'secondary') {
  return el('button', { type: 'button', class: kind, text, onclick });
}

/** A Delete button: asks `question`, then calls `DELETE path` and shows `done`. */
function deleteButton(question, done, path) {
  return button(
    'Delete',
    confirmThen(question, () => act(done, () => api('DELETE', path))),
    'danger',
  );
}

/**
 * A card form: `attributes` (its `aria-label`, …), an optional heading, its fields and a submit button;
 * `onSubmit(data)` gets the form's FormData (the page does not navigate).
 */
function card(attributes, heading, fields, submit, onSubmit) {
  const form = el(
    'form',
    { class: 'card', ...attributes },
    heading ? el('h2', { text: heading }) : null,
    el('div', { class: 'fields' }, fields, el('button', { type: 'submit', text: submit })),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    onSubmit(new FormData(form));
  });
  return form;
}

/** The comma- or space-separated list entered in the field `name` of `data`. */
const listField = (data, name) => list(String(data.get(name)));

// List views: a search on the name / id (the API's `search`) and "showing n of total".
const searches = { users: '', roles: '', clients: '', permissions: '' };

function listQuery(kind) {
  const query = new URLSearchParams({ limit: String(PAGE) });
  if (searches[kind]) query.set('search', searches[kind]);
  return `${kind}?${query}`;
}

function searchBar(kind, page, noun) {
  const form = el(
    'form',
    { class: 'fields', role: 'search', 'aria-label': `Search ${kind}` },
    field('Search', el('input', { name: 'search', type: 'search', value: searches[kind], maxlength: 256 })),
    el('button', { type: 'submit', class: 'secondary', text: 'Search' }),
    el('span', {
      text: `${page.items.length < page.total ? `showing ${page.items.length} of ` : ''}${page.total} ${noun}`,
    }),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    searches[kind] = String(new FormData(form).get('search') ?? '').trim();
    show(kind);
  });
  return form;
}

/**
 * The list view of one resource of the API: search bar, a table with a row per item (`data-{attribute}` =
 * `key(item)`, a cell per `cells(item)` text, then the actions: Edit when the resource has an `editor`,
 * then `actions(item)`), the editor's place and the resource's "new" form.
 */
function resourceView(kind, resource) {
  return async () => {
    const page = await api('GET', listQuery(kind));
    const editor = resource.editor ? el('div') : null;
    const rows = page.items.map((item) =>
      el(
        'tr',
        { [`data-${resource.attribute}`]: resource.key(item) },
        resource.cells(item).map((text) => el('td', { text })),
        el(
          'td',
          { class: 'actions' },
          resource.editor ? button('Edit', () => editor.replaceChildren(resource.editor(item))) : null,
          resource.actions(item),
        ),
      ),
    );
    return el(
      'div',
      {},
      searchBar(kind, page, resource.noun),
      table(resource.headers, rows),
      editor,
      resource.form(),
    );
  };
}

const usersView = resourceView('users', {
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
  actions: (user) => {
    const post = (text, done, action) =>
      button(text, () => act(done, () => api('POST', `users/${user.id}/${action}`)));
    return [
      user.isEnabled
        ? post('Disable', `Disabled ${user.userName}.`, 'disable')
        : post('Enable', `Enabled ${user.userName}.`, 'enable'),
      user.isLockedOut ? post('Unlock', `Unlocked ${user.userName}.`, 'unlock') : null,
      deleteButton(`Delete user ${user.userName}?`, `Deleted ${user.userName}.`, `users/${user.id}`),
    ];
  },
  editor: userEditor,
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
        const body = { userName: data.get('userName') };
        if (data.get('password')) body.password = data.get('password');
        const roles = listField(data, 'roles');
        if (roles.length) body.roles = roles;
        act(
          (user) => `Created user ${user.userName}.`,
          () => api('POST', 'users', body),
        );
      },
    ),
});

function userEditor(user) {
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
    ],
    'Save user',
    (data) =>
      act(`Saved ${data.get('userName')}.`, () =>
        api('PATCH', `users/${user.id}`, {
          userName: data.get('userName'),
          roles: listField(data, 'roles'),
          directPermissions: listField(data, 'directPermissions'),
          deniedPermissions: listField(data, 'deniedPermissions'),
          // blank clears a profile field
          displayName: String(data.get('displayName')).trim() || null,
          givenName: String(data.get('givenName')).trim() || null,
          familyName: String(data.get('familyName')).trim() || null,
          email: String(data.get('email')).trim() || null,
          emailVerified: data.get('emailVerified') === 'on',
        }),
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
        api('PUT', `users/${user.id}/password`, { password: data.get('password') }),
      ),
  );
  return el('div', {}, form, password, factorsOf(user), consentsOf(user));
}

/**
 * Whether two factors are required for a role or a client (`kind`, API path `path`, target id `id`), with
 * a button that switches it; filled when loaded.
 */
function mfaRequirement(kind, path, id, label) {
  const box = el('section', { class: 'card', 'aria-label': `Two factors for ${label}` });
  api('GET', 'mfa-requirements')
    .then((page) => {
      const required = page.items.some((r) => r.targetKind === kind && r.targetId === id);
      box.append(
        el('p', {
          text: required
            ? `Two factors are required for ${label}.`
            : `Two factors are not required for ${label}.`,
        }),
        button(required ? 'Stop requiring two factors' : 'Require two factors', () =>
          act(
            required ? `Two factors no longer required for ${label}.` : `Two factors required for ${label}.`,
            () => api(required ? 'DELETE' : 'PUT', `${path}/mfa-required`),
          ),
        ),
      );
    })
    .catch((error) => box.append(el('p', { class: 'error', text: error.message })));
  return box;
}

/**
 * The second factors of `user` (TOTP, recovery codes left, passkeys) with Remove buttons, and whether an
 * administrator requires two factors for the user (a toggle); filled when loaded.
 */
function factorsOf(user) {
  const box = el(
    'section',
    { class: 'card', 'aria-label': `Second factors of ${user.userName}` },
    el('h2', { text: `Second factors of ${user.userName}` }),
  );
  Promise.all([api('GET', `users/${user.id}/factors`), api('GET', `users/${user.id}/passkeys`)])
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
                  api('DELETE', `users/${user.id}/factors/totp`),
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
                  api('DELETE', `users/${user.id}/passkeys/${encodeURIComponent(p.id)}`),
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
              api(required ? 'DELETE' : 'PUT', `users/${user.id}/mfa-required`),
            ),
          ),
        ),
      );
    })
    .catch((error) => box.append(el('p', { class: 'error', text: error.message })));
  return box;
}

/** The clients `user` consented to (third-party clients), each with a Revoke button; filled when loaded. */
function consentsOf(user) {
  const box = el(
    'section',
    { class: 'card', 'aria-label': `Consents of ${user.userName}` },
    el('h2', { text: `Consents of ${user.userName}` }),
  );
  api('GET', `users/${user.id}/consents`)
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
                  api('DELETE', `users/${user.id}/consents/${encodeURIComponent(c.clientId)}`),
                ),
              ),
              'danger',
            ),
          ),
        ),
      );
      box.append(table(['Client', 'Scopes', 'Given', 'Actions'], rows));
    })
    .catch((error) => box.append(el('p', { class: 'error', text: error.message })));
  return box;
}

const rolesView = resourceView('roles', {
  noun: 'role(s)',
  attribute: 'role',
  key: (role) => role.name,
  headers: ['Name', 'Description', 'Permissions', 'Denied', 'Parents', 'Kind', 'Actions'],
  cells: (role) => [
    role.name,
    role.description,
    joined(role.permissions),
    joined(role.deniedPermissions),
    joined(role.parentRoles),
    role.isSystem ? 'built-in' : '',
  ],
  actions: (role) =>
    role.isSystem
      ? null
      : deleteButton(`Delete role ${role.name}?`, `Deleted role ${role.name}.`, `roles/${role.id}`),
  editor: roleEditor,
  form: () =>
    card(
      { 'aria-label': 'New role' },
      'New role',
      [
        field('Name', el('input', { name: 'name', required: true, maxlength: 64 })),
        field('Description', el('input', { name: 'description' })),
        field('Permissions', el('input', { name: 'permissions' })),
        field('Denied permissions', el('input', { name: 'deniedPermissions' })),
      ],
      'Create role',
      (data) => {
        const body = { name: data.get('name'), description: data.get('description') };
        const permissions = listField(data, 'permissions');
        const denied = listField(data, 'deniedPermissions');
        if (permissions.length) body.permissions = permissions;
        if (denied.length) body.deniedPermissions = denied;
        act(
          (role) => `Created role ${role.name}.`,
          () => api('POST', 'roles', body),
        );
      },
    ),
});

function roleEditor(role) {
  const form = card(
    { 'aria-label': `Edit role ${role.name}` },
    `Edit ${role.name}`,
    [
      field('Name', el('input', { name: 'name', value: role.name, required: true, disabled: role.isSystem })),
      field('Description', el('input', { name: 'description', value: role.description })),
      field(
        'Permissions',
        el('input', { name: 'permissions', value: joined(role.permissions), disabled: role.isSystem }),
      ),
      field(
        'Denied permissions',
        el('input', {
          name: 'deniedPermissions',
          value: joined(role.deniedPermissions),
          disabled: role.isSystem,
        }),
      ),
      field(
        'Parent roles',
        el('input', { name: 'parentRoles', value: joined(role.parentRoles), disabled: role.isSystem }),
      ),
    ],
    'Save role',
    (data) => {
      const body = { description: data.get('description') };
      if (!role.isSystem) {
        body.name = data.get('name');
        body.permissions = listField(data, 'permissions');
        body.deniedPermissions = listField(data, 'deniedPermissions');
        body.parentRoles = listField(data, 'parentRoles');
      }
      act(`Saved role ${body.name ?? role.name}.`, () => api('PATCH', `roles/${role.id}`, body));
    },
  );
  return el('div', {}, form, mfaRequirement('role', `roles/${role.id}`, role.id, `role ${role.name}`));
}

/** The label of a grant type: the short name of the URN ones (RFC 8693 token exchange, RFC 8628 device code). */
const grantLabel = (grant) =>
  grant.startsWith('urn:')
    ? grant.replace('urn:ietf:params:oauth:grant-type:', '').replace(/[-_]/g, ' ')
    : grant;

/** The fields a client's create and edit forms share, filled from `client` (empty for a new one). */
function clientFields(client) {
  return [
    field('Redirect URIs', el('textarea', { name: 'redirectUris', value: client?.redirectUris.join('\n') })),
    field('Scopes', el('input', { name: 'allowedScopes', value: client && joined(client.allowedScopes) })),
    field('Permissions', el('input', { name: 'permissions', value: client && joined(client.permissions) })),
    el(
      'div',
      {},
      GRANTS.map((g) => checkbox(g, grantLabel(g), client ? client.allowedGrantTypes.includes(g) : false)),
    ),
    field(
      'Post-logout redirect URIs',
      el('textarea', { name: 'postLogoutRedirectUris', value: client?.postLogoutRedirectUris.join('\n') }),
    ),
    field(
      'Back-channel logout URI',
      el('input', { name: 'backchannelLogoutUri', value: client?.backchannelLogoutUri ?? '' }),
    ),
    checkbox('requireConsent', 'Third-party (users must consent)', client?.requireConsent ?? false),
  ];
}

/** The OpenID Connect settings entered in a client form. */
function clientOidcBody(data) {
  return {
    postLogoutRedirectUris: listField(data, 'postLogoutRedirectUris'),
    backchannelLogoutUri: String(data.get('backchannelLogoutUri')).trim() || null,
    requireConsent: data.get('requireConsent') === 'on',
  };
}

const clientsView = resourceView('clients', {
  noun: 'client(s)',
  attribute: 'client',
  key: (client) => client.clientId,
  headers: ['Client id', 'Name', 'Type', 'Status', 'Grant types', 'Scopes', 'Redirect URIs', 'Actions'],
  cells: (client) => [
    client.clientId,
    client.displayName,
    client.clientType,
    client.isEnabled ? 'enabled' : 'disabled',
    joined(client.allowedGrantTypes),
    joined(client.allowedScopes),
    joined(client.redirectUris),
  ],
  actions: (client) => {
    const path = `clients/${encodeURIComponent(client.clientId)}`;
    return [
      button(client.isEnabled ? 'Disable' : 'Enable', () =>
        act(`${client.isEnabled ? 'Disabled' : 'Enabled'} ${client.clientId}.`, () =>
          api('PATCH', path, { isEnabled: !client.isEnabled }),
        ),
      ),
      client.clientType === 'confidential'
        ? button(
            'New secret',
            confirmThen(`Replace the secret of ${client.clientId}?`, () =>
              act(`New secret of ${client.clientId} (shown once): `, () => api('POST', `${path}/secret`)),
            ),
          )
        : null,
      deleteButton(`Delete client ${client.clientId}?`, `Deleted client ${client.clientId}.`, path),
    ];
  },
  editor: clientEditor,
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
        const body = {
          clientId: data.get('clientId'),
          displayName: data.get('displayName'),
          clientType: data.get('clientType'),
          redirectUris: listField(data, 'redirectUris'),
          allowedScopes: listField(data, 'allowedScopes'),
          allowedGrantTypes: GRANTS.filter((g) => data.get(g) === 'on'),
          ...clientOidcBody(data),
        };
        const permissions = listField(data, 'permissions');
        if (permissions.length) body.permissions = permissions;
        act(
          (client) =>
            client.clientSecret
              ? `Created client ${client.clientId}. Its secret (shown once): `
              : `Created client ${client.clientId}.`,
          () => api('POST', 'clients', body),
        );
      },
    ),
});

function clientEditor(client) {
  const settings = clientSettingsCard(client, { el, field, checkbox, card, act, api, list });
  const form = card(
    { 'aria-label': `Edit client ${client.clientId}` },
    `Edit ${client.clientId}`,
    [
      field('Display name', el('input', { name: 'displayName', value: client.displayName })),
      ...clientFields(client),
    ],
    'Save client',
    (data) =>
      act(`Saved client ${client.clientId}.`, () =>
        api('PATCH', `clients/${encodeURIComponent(client.clientId)}`, {
          displayName: data.get('displayName'),
          redirectUris: listField(data, 'redirectUris'),
          allowedScopes: listField(data, 'allowedScopes'),
          permissions: listField(data, 'permissions'),
          allowedGrantTypes: GRANTS.filter((g) => data.get(g) === 'on'),
          ...clientOidcBody(data),
        }),
      ),
  );
  return el(
    'div',
    {},
    form,
    settings,
    mfaRequirement(
      'client',
      `clients/${encodeURIComponent(client.clientId)}`,
      client.clientId,
      `client ${client.clientId}`,
    ),
  );
}

const permissionsView = resourceView('permissions', {
  noun: 'permission(s)',
  attribute: 'permission',
  key: (p) => p.code,
  headers: ['Code', 'Description', 'Actions'],
  cells: (p) => [p.code, p.description],
  actions: (p) =>
    deleteButton(
      `Delete permission ${p.code}?`,
      `Deleted permission ${p.code}.`,
      `permissions/${encodeURIComponent(p.code)}`,
    ),
  form: () =>
    card(
      { 'aria-label': 'New permission' },
      'New permission',
      [
        field('Code', el('input', { name: 'code', required: true, maxlength: 256 })),
        field('Description', el('input', { name: 'description' })),
      ],
      'Add permission',
      (data) =>
        act(
          (p) => `Added permission ${p.code}.`,
          () => api('POST', 'permissions', { code: data.get('code'), description: data.get('description') }),
        ),
    ),
});

const auditFilter = { category: '', outcome: '', subject: '', from: '', to: '', offset: 0 };

async function auditView() {
  const query = new URLSearchParams({ limit: String(PAGE), offset: String(auditFilter.offset) });
  for (const key of ['category', 'outcome', 'subject'])
    if (auditFilter[key]) query.set(key, auditFilter[key]);
  for (const key of ['from', 'to'])
    if (auditFilter[key]) query.set(key, new Date(auditFilter[key]).toISOString());
  const page = await api('GET', `audit?${query}`);
  const form = card(
    { 'aria-label': 'Audit filter' },
    null,
    [
      field(
        'Category',
        el('input', { name: 'category', value: auditFilter.category, placeholder: 'Login, Token, Admin…' }),
      ),
      field(
        'Outcome',
        el('input', { name: 'outcome', value: auditFilter.outcome, placeholder: 'Success, Denied…' }),
      ),
      field('Subject id', el('input', { name: 'subject', value: auditFilter.subject })),
      field('From', el('input', { name: 'from', type: 'datetime-local', value: auditFilter.from })),
      field('To', el('input', { name: 'to', type: 'datetime-local', value: auditFilter.to })),
    ],
    'Apply filter',
    (data) => {
      for (const key of ['category', 'outcome', 'subject', 'from', 'to'])
        auditFilter[key] = String(data.get(key) ?? '').trim();
      auditFilter.offset = 0;
      show('audit');
    },
  );
  const rows = page.items.map((e) =>
    el(
      'tr',
      {},
      el('td', { text: when(e.time) }),
      el('td', { text: e.category }),
      el('td', { text: e.outcome }),
      el('td', { text: e.subjectName ? `${e.subjectName} (${e.subjectId})` : (e.subjectId ?? '') }),
      el('td', { text: e.clientId ?? '' }),
      el('td', { text: e.failureCode ?? '' }),
      el('td', { text: e.remoteAddress ?? '' }),
      el('td', {}, el('pre', { text: e.details ? JSON.stringify(e.details) : '' })),
    ),
  );
  const last = Math.min(page.offset + page.items.length, page.total);
  const pager = el(
    'div',
    { class: 'pager' },
    el('button', {
      type: 'button',
      class: 'secondary',
      text: 'Newer',
      disabled: page.offset === 0,
      onclick: () => {
        auditFilter.offset = Math.max(0, auditFilter.offset - PAGE);
        show('audit');
      },
    }),
    el('span', { text: page.total ? `${page.offset + 1}–${last} of ${page.total}` : 'no events' }),
    el('button', {
      type: 'button',
      class: 'secondary',
      text: 'Older',
      disabled: last >= page.total,
      onclick: () => {
        auditFilter.offset += PAGE;
        show('audit');
      },
    }),
  );
  return el(
    'div',
    {},
    form,
    pager,
    table(['Time', 'Category', 'Outcome', 'Subject', 'Client', 'Failure code', 'Address', 'Details'], rows),
  );
}

// The views of the navigation buttons (`data-view`).
const views = {
  users: usersView,
  roles: rolesView,
  clients: clientsView,
  permissions: permissionsView,
  audit: auditView,
};

// ── start ──

function subjectOf(accessToken) {
  try {
    const payload = accessToken.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    return JSON.parse(atob(payload)).sub;
  } catch {
    return undefined;
  }
}

async function render() {
  const current = tokens();
  $('signed-out').hidden = Boolean(current);
  $('signed-in').hidden = !current;
  $('sign-out').hidden = !current;
  $('who-box').hidden = !current;
  $('who').textContent = '';
  if (!current) return;
  const sub = subjectOf(current.accessToken);
  $('who').textContent = sub ?? '';
  api('GET', `users/${encodeURIComponent(sub)}`)
    .then((user) => {
      $('who').textContent = user.userName;
    })
    .catch(() => undefined);
  await show(currentView);
}

$('sign-in').addEventListener('click', () => signIn().catch((error) => status(error.message, 'error')));
$('sign-out').addEventListener('click', () => signOut());
for (const button of document.querySelectorAll('nav button')) {
  button.addEventListener('click', () => {
    status('');
    show(button.dataset.view);
  });
}
await handleCallback();
await render();
