/**
 * Discovery: RFC 8414 authorization server metadata at `/.well-known/oauth-authorization-server`, the
 * same document (plus the OpenID fields) at `/.well-known/openid-configuration` (OpenID Connect
 * Discovery 1.0 §3), and the JWK Set at `/.well-known/jwks.json` (RFC 7517 §5).
 */

import type { FastifyInstance } from 'fastify';
import { ACR_VALUES_SUPPORTED } from '../mfa/assurance.ts';
import { CLIENT_ASSERTION_SIGNING_ALGS, CLIENT_SECRET_JWT_ALGS } from './client-auth-jwt.ts';
import type { OAuthContext } from './context.ts';
import { DEVICE_AUTHORIZATION_PATH, DEVICE_CODE_GRANT } from './device.ts';
import { OIDC_SCOPES, SCOPE_CLAIMS } from './id-token.ts';
import { END_SESSION_PATH } from './logout.ts';
import { PAR_PATH } from './par.ts';
import { AUTHORIZE_PATH } from './paths.ts';
import { REGISTRATION_PATH } from './registration.ts';
import { USERINFO_PATH } from './userinfo.ts';

/** Endpoint paths, relative to the issuer. */
export const ENDPOINT_PATHS = Object.freeze({
  authorization: AUTHORIZE_PATH,
  token: '/connect/token',
  revocation: '/connect/revocation',
  introspection: '/connect/introspect',
  pushedAuthorizationRequest: PAR_PATH,
  jwks: '/.well-known/jwks.json',
  userinfo: USERINFO_PATH,
  endSession: END_SESSION_PATH,
});

/**
 * Audiences accepted in client assertions (`private_key_jwt`, `client_secret_jwt`) (RFC 7523 §3 item 3): the issuer identifier and the
 * URLs of the endpoints that authenticate clients.
 */
export function assertionAudiences(issuer: string): string[] {
  return [
    issuer,
    `${issuer}${ENDPOINT_PATHS.token}`,
    `${issuer}${ENDPOINT_PATHS.revocation}`,
    `${issuer}${ENDPOINT_PATHS.introspection}`,
  ];
}

/** The metadata document for the current issuer (RFC 8414 §2, OIDC Discovery §3). */
export function authorizationServerMetadata(ctx: OAuthContext): Record<string, unknown> {
  const iss = ctx.config.issuer;
  // client_secret_jwt only with a client-secret key (the secrets it needs are sealed with it).
  const secretJwt = ctx.clientSecrets.sealingEnabled;
  const jwtMethods = secretJwt ? ['client_secret_jwt', 'private_key_jwt'] : ['private_key_jwt'];
  const authMethods = ['client_secret_basic', 'client_secret_post', ...jwtMethods, 'none'];
  const assertionAlgs = [...CLIENT_ASSERTION_SIGNING_ALGS, ...(secretJwt ? CLIENT_SECRET_JWT_ALGS : [])];
  const alg = ctx.keys.alg;
  return {
    issuer: iss,
    authorization_endpoint: `${iss}${ENDPOINT_PATHS.authorization}`,
    token_endpoint: `${iss}${ENDPOINT_PATHS.token}`,
    jwks_uri: `${iss}${ENDPOINT_PATHS.jwks}`,
    revocation_endpoint: `${iss}${ENDPOINT_PATHS.revocation}`,
    introspection_endpoint: `${iss}${ENDPOINT_PATHS.introspection}`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: [...ctx.config.grantTypes],
    token_endpoint_auth_methods_supported: authMethods,
    revocation_endpoint_auth_methods_supported: authMethods,
    token_endpoint_auth_signing_alg_values_supported: assertionAlgs,
    revocation_endpoint_auth_signing_alg_values_supported: assertionAlgs,
    introspection_endpoint_auth_methods_supported: [
      'client_secret_basic',
      'client_secret_post',
      ...jwtMethods,
    ],
    introspection_endpoint_auth_signing_alg_values_supported: assertionAlgs,
    code_challenge_methods_supported: ctx.config.allowPlainPkce ? ['S256', 'plain'] : ['S256'],
    scopes_supported: [...OIDC_SCOPES, 'offline_access'],
    authorization_response_iss_parameter_supported: true,
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: [alg],
    // OIDC Discovery §3: the ID token's claims and those the scopes release at the UserInfo endpoint.
    acr_values_supported: [...ACR_VALUES_SUPPORTED],
    claims_supported: [
      ...new Set([
        'iss',
        'aud',
        'exp',
        'iat',
        'auth_time',
        'nonce',
        'amr',
        'acr',
        'sid',
        'at_hash',
        ...Object.values(SCOPE_CLAIMS).flat(),
      ]),
    ],
    userinfo_endpoint: `${iss}${ENDPOINT_PATHS.userinfo}`,
    end_session_endpoint: `${iss}${ENDPOINT_PATHS.endSession}`,
    backchannel_logout_supported: true,
    backchannel_logout_session_supported: true,
    prompt_values_supported: ['none', 'login', 'consent', 'select_account'],
    claims_parameter_supported: false,
    request_parameter_supported: false,
    ...(ctx.dpop ? { dpop_signing_alg_values_supported: [...ctx.dpop.algorithms] } : {}),
    ...(ctx.config.registration ? { registration_endpoint: `${iss}${REGISTRATION_PATH}` } : {}),
    ...(ctx.config.grantTypes.includes(DEVICE_CODE_GRANT)
      ? { device_authorization_endpoint: `${iss}${DEVICE_AUTHORIZATION_PATH}` }
      : {}),
    ...(ctx.config.par
      ? {
          pushed_authorization_request_endpoint: `${iss}${ENDPOINT_PATHS.pushedAuthorizationRequest}`,
          require_pushed_authorization_requests: ctx.config.par.requirePushedAuthorizationRequests,
        }
      : {}),
  };
}

/** Registers the two discovery documents and the JWKS. */
export function registerMetadataEndpoints(app: FastifyInstance, ctx: OAuthContext): void {
  const send = () => authorizationServerMetadata(ctx);
  app.get('/.well-known/oauth-authorization-server', async (_req, reply) => {
    reply.header('cache-control', 'public, max-age=300');
    return send();
  });
  app.get('/.well-known/openid-configuration', async (_req, reply) => {
    reply.header('cache-control', 'public, max-age=300');
    return send();
  });
  app.get(ENDPOINT_PATHS.jwks, async (_req, reply) => {
    reply.header('cache-control', 'public, max-age=300').type('application/jwk-set+json; charset=utf-8');
    return ctx.keys.jwks();
  });
}
