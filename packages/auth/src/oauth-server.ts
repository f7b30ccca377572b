/**
 * The OAuth 2.0 authorization server of spec 001 as one Fastify plugin ({@link oauthServer}): token,
 * authorization, revocation and introspection endpoints, discovery metadata, JWKS, and the login pages of
 * `login/`. An HTTP-layer module: it composes the OAuth layer and the login pages, which import the OAuth
 * layer and never the other way round.
 */
import cookie from '@fastify/cookie';
import type { FastifyInstance } from 'fastify';
import { registerLoginPage } from './login/index.ts';
import { registerAuthorizeEndpoint } from './oauth/authorize.ts';
import { corsEndpoints, registerCors } from './oauth/cors.ts';
import { DEVICE_CODE_GRANT, registerDeviceAuthorizationEndpoint } from './oauth/device.ts';
import { registerDeviceVerificationPage } from './oauth/device-page.ts';
import { createOAuthContext, type OAuthServerOptions } from './oauth/index.ts';
import { ENDPOINT_PATHS, registerMetadataEndpoints } from './oauth/metadata.ts';
import { registerParEndpoint } from './oauth/par.ts';
import { registerRegistrationEndpoints } from './oauth/registration.ts';
import { registerRevocationAndIntrospection } from './oauth/revocation.ts';
import { registerTokenEndpoint } from './oauth/token-endpoint.ts';
import { registerUserInfoEndpoint } from './oauth/userinfo.ts';

/**
 * Fastify plugin: registers `@fastify/cookie` and every OAuth route and the login page on `app`.
 * Routes: `POST /connect/token`, `GET /connect/authorize`, `POST /connect/revocation`,
 * `POST /connect/introspect`, `GET /.well-known/oauth-authorization-server`,
 * `GET /.well-known/openid-configuration`, `GET /.well-known/jwks.json`, `GET|POST /login`, `POST /logout`,
 * and CORS with `OPTIONS` preflights on the endpoints browser apps call (see `cors.ts`).
 */
export async function oauthServer(app: FastifyInstance, options: OAuthServerOptions): Promise<void> {
  const ctx = createOAuthContext(options);
  if (!app.hasDecorator('parseCookie')) await app.register(cookie);
  registerCors(app, ctx, corsEndpoints(ENDPOINT_PATHS));
  registerMetadataEndpoints(app, ctx);
  registerAuthorizeEndpoint(app, ctx);
  registerTokenEndpoint(app, ctx);
  if (ctx.config.par) registerParEndpoint(app, ctx);
  if (ctx.config.registration) registerRegistrationEndpoints(app, ctx);
  if (ctx.config.grantTypes.includes(DEVICE_CODE_GRANT)) {
    registerDeviceAuthorizationEndpoint(app, ctx);
    registerDeviceVerificationPage(app, ctx);
  }
  registerRevocationAndIntrospection(app, ctx);
  registerUserInfoEndpoint(app, ctx);
  registerLoginPage(app, ctx);
}
