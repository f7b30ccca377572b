/**
 * The admin web page at `{BasePath}/`: the build of the TypeScript page in `./web/` (`./web/dist/`: HTML, one
 * ES module, one stylesheet; no CDN), made by `scripts/build-admin-web.ts` (run by the package's `npm start`
 * and `npm test` set-up), served with a strict Content-Security-Policy. The page signs in
 * through this server's authorization-code + PKCE flow as the public client `clientId` (its redirect URI
 * must be `{origin}{BasePath}/`) and then calls `{BasePath}/api` with the access token. The page gets the
 * grant types a client may be allowed from the store's `GRANT_TYPES` (an attribute of its `<html>` element).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { GRANT_TYPES } from '../store/types.ts';

/** Options of the admin page. */
export interface AdminPageOptions {
  /** Public client the page signs in with (authorization code + PKCE). Default `demo-spa`. */
  clientId?: string;
  /** Scope requested at sign-in. Default `openid profile offline_access` (a refresh token keeps the session). */
  scope?: string;
}

/** Default client of the admin page (created by the server's bootstrap with `{issuer}{BasePath}/` as redirect URI). */
export const DEFAULT_ADMIN_PAGE_CLIENT_ID = 'demo-spa';
/** Default scope requested by the admin page. */
export const DEFAULT_ADMIN_PAGE_SCOPE = 'openid profile offline_access';

const WEB_DIST = join(import.meta.dirname, 'web', 'dist');

const attr = (value: string) => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  // the authorization code arrives in the page URL: never leak it in a Referer header
  'referrer-policy': 'no-referrer',
};

/**
 * Registers `GET {basePath}` (redirect to the trailing-slash URL), `GET {basePath}/`, `{basePath}/app.js`
 * and `{basePath}/app.css` on `app` (no authentication: the page holds no data; the API checks every call).
 * @throws Error at registration when the built files are missing (run `node scripts/build-admin-web.ts` in
 * packages/auth).
 */
export function registerAdminPage(
  app: FastifyInstance,
  basePath: string,
  options: AdminPageOptions = {},
): void {
  const read = (name: string) => {
    try {
      return readFileSync(join(WEB_DIST, name), 'utf8');
    } catch (err) {
      throw new Error(
        `admin page: ${join(WEB_DIST, name)} is missing; build it with \`node scripts/build-admin-web.ts\` in packages/auth (${(err as Error).message})`,
      );
    }
  };
  const index = read('index.html')
    .replace('%BASE_PATH%', attr(basePath))
    .replace('%CLIENT_ID%', attr(options.clientId ?? DEFAULT_ADMIN_PAGE_CLIENT_ID))
    .replace('%SCOPE%', attr(options.scope ?? DEFAULT_ADMIN_PAGE_SCOPE))
    .replace('%GRANT_TYPES%', attr(GRANT_TYPES.join(' ')));
  const script = read('app.js');
  const style = read('app.css');

  const send = (reply: FastifyReply, type: string, body: string, cache: string) =>
    reply.headers(SECURITY_HEADERS).header('cache-control', cache).type(type).send(body);

  app.get(basePath, { schema: { hide: true } }, (_request, reply) => reply.redirect(`${basePath}/`, 301));
  app.get(`${basePath}/`, { schema: { hide: true } }, (_request, reply) =>
    send(reply, 'text/html; charset=utf-8', index, 'no-store'),
  );
  app.get(`${basePath}/app.js`, { schema: { hide: true } }, (_request, reply) =>
    send(reply, 'text/javascript; charset=utf-8', script, 'no-cache'),
  );
  app.get(`${basePath}/app.css`, { schema: { hide: true } }, (_request, reply) =>
    send(reply, 'text/css; charset=utf-8', style, 'no-cache'),
  );
}
