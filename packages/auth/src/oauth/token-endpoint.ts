/**
 * The token endpoint `POST /connect/token` (RFC 6749 §3.2, §4.1.3, §4.3, §4.4, §6; RFC 7636 §4.5–4.6;
 * RFC 9700 §4.14.2) with spec 001's error table: every answer carries `Cache-Control: no-store` and
 * `Pragma: no-cache`; `invalid_client` adds `WWW-Authenticate: Basic`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clientAddress } from '../client-address.ts';
import { AuditCategory, AuditOutcome, GRANT_TYPES, type GrantType } from '../store/types.ts';
import { familyIdFor, type OAuthContext } from './context.ts';
import { deviceCodeGrant } from './device.ts';
import { dpopSuccessHeaders, tokenRequestProof } from './dpop-token.ts';
import { OAuthError, oauthErrorHandler, sendOAuthError, setNoStore } from './errors.ts';
import { parseBasicAuth, registerFormParser, requiredParam, requireForm } from './form.ts';
import { requestedAudience } from './resource.ts';
import { tokenExchangeGrant } from './token-exchange.ts';
import {
  authorizationCodeGrant,
  clientCredentialsGrant,
  issue,
  passwordGrant,
  refreshGrant,
  type TokenBinding,
} from './token-grants.ts';

/** Successful token response (RFC 6749 §5.1). */
export interface TokenResponse {
  access_token: string;
  /** `DPoP` for DPoP-bound access tokens (RFC 9449 §5), else `Bearer`. */
  token_type: 'Bearer' | 'DPoP';
  /** Seconds. */
  expires_in: number;
  scope: string;
  refresh_token?: string;
  id_token?: string;
  /** Token exchange (RFC 8693 §2.2.1): the type of the issued token. */
  issued_token_type?: string;
}

/**
 * JSON Schema of {@link TokenResponse}: Fastify compiles it into a serializer (fast-json-stringify) for
 * 200 answers. Error answers (RFC 6749 §5.2) are sent with other status codes and serialized as usual.
 */
const TOKEN_RESPONSE_SCHEMA = {
  type: 'object',
  required: ['access_token', 'token_type', 'expires_in', 'scope'],
  properties: {
    access_token: { type: 'string' },
    token_type: { type: 'string' },
    expires_in: { type: 'integer' },
    scope: { type: 'string' },
    refresh_token: { type: 'string' },
    id_token: { type: 'string' },
    issued_token_type: { type: 'string' },
  },
  additionalProperties: false,
} as const;

/** Registers `POST /connect/token` on an encapsulated context (its own form-body parser). */
export function registerTokenEndpoint(app: FastifyInstance, ctx: OAuthContext): void {
  app.register(async (scope) => {
    registerFormParser(scope);
    scope.setErrorHandler(oauthErrorHandler);
    scope.post(
      '/connect/token',
      { schema: { response: { 200: TOKEN_RESPONSE_SCHEMA } } },
      async (req, reply) => {
        try {
          const response = await handleTokenRequest(req, ctx);
          for (const [name, value] of Object.entries(dpopSuccessHeaders(ctx))) reply.header(name, value);
          return setNoStore(reply).type('application/json; charset=utf-8').send(response);
        } catch (err) {
          if (err instanceof OAuthError) {
            if (err.error === 'invalid_client') {
              await ctx.store.appendAudit({
                category: AuditCategory.Token,
                outcome: AuditOutcome.Denied,
                clientId: clientIdHint(req),
                failureCode: 'invalid_client',
                remoteAddress: clientAddress(req),
              });
            }
            return sendOAuthError(reply, err);
          }
          throw err;
        }
      },
    );
  });
}

function clientIdHint(req: FastifyRequest): string | null {
  const body = req.body;
  const fromForm = body instanceof URLSearchParams ? body.get('client_id') : null;
  if (fromForm) return fromForm.slice(0, 128);
  try {
    return parseBasicAuth(req.headers.authorization)?.clientId.slice(0, 128) ?? null;
  } catch {
    return null;
  }
}

/**
 * Processes one token request.
 * @throws OAuthError for every refusal of spec 001's token-endpoint table.
 */
async function handleTokenRequest(req: FastifyRequest, ctx: OAuthContext): Promise<TokenResponse> {
  const form = requireForm(req.body);
  const grantType = requiredParam(form, 'grant_type');
  const authenticated = await ctx.clients.authenticate(req, form);
  if (
    !(GRANT_TYPES as readonly string[]).includes(grantType) ||
    !ctx.config.grantTypes.includes(grantType as GrantType)
  ) {
    throw new OAuthError('unsupported_grant_type', `grant_type '${grantType.slice(0, 64)}' is not supported`);
  }
  const { client } = authenticated;
  if (!client.allowedGrantTypes.includes(grantType as GrantType)) {
    throw new OAuthError('unauthorized_client', `client is not allowed the grant type '${grantType}'`);
  }
  const audience = requestedAudience(form, client);
  const proof = await tokenRequestProof(req, ctx, client, '/connect/token');
  const bind: TokenBinding = { proof, audience };
  switch (grantType as GrantType) {
    case 'password':
      return passwordGrant(req, ctx, authenticated, form, bind);
    case 'refresh_token':
      return refreshGrant(req, ctx, client, form, bind);
    case 'authorization_code':
      return authorizationCodeGrant(req, ctx, client, form, bind);
    case 'client_credentials':
      return clientCredentialsGrant(ctx, authenticated, form, bind);
    case 'urn:ietf:params:oauth:grant-type:token-exchange':
      return tokenExchangeGrant(req, ctx, client, form, bind);
    case 'urn:ietf:params:oauth:grant-type:device_code': {
      // RFC 8628 §3.5: the tokens of an approved device request, like those of an authorization code.
      const { user, scope, deviceCodeHash } = await deviceCodeGrant(ctx, client, form);
      return issue(ctx, client, user, scope, familyIdFor(deviceCodeHash, user.securityStamp), bind, {
        nonce: null,
        authTime: undefined,
      });
    }
  }
}
