/**
 * The admin page's settings, written by the server into attributes of the page's `<html>` element
 * (`src/admin/page.ts`): the base path, the public client and scope the page signs in with, and the grant types
 * a client may be allowed.
 */
const html = document.documentElement;

/** `BasePath` of the administration API and page (e.g. `/auth-admin`). */
export const BASE = html.dataset.basePath ?? '';
/** The public client the page signs in as (authorization code + PKCE). */
export const CLIENT_ID = html.dataset.clientId ?? '';
/** The scope requested at sign-in. */
export const SCOPE = html.dataset.scope ?? '';
/** The grant types a client may be allowed, space-separated by the server (its `GRANT_TYPES`). */
export const GRANTS: readonly string[] = (html.dataset.grantTypes ?? '').split(' ').filter(Boolean);
/** The administration API's base URL. */
export const API = `${BASE}/api`;
/** The page's own URL, registered as the client's redirect and post-logout redirect URI. */
export const REDIRECT_URI = `${location.origin}${BASE}/`;
/** Page size of the list views. */
export const PAGE = 50;
