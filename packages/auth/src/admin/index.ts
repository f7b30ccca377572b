/**
 * The administration REST API and admin page of the auth service (spec 001 "Administration REST API"), as one Fastify plugin: {@link adminApi}.
 *
 * Wiring (in the server):
 * ```ts
 * const app = Fastify({ ...adminServerOptions('/auth-admin') }); // maxParamLength, frameworkErrors
 * const authorization = new AuthorizationService({ store, tokenVerifier }); // verifier over the server's JWKS
 * await app.register(adminApi, { basePath: '/auth-admin', store, authorization, passwordHasher: hasher });
 * // API under /auth-admin/api (OpenAPI: /auth-admin/api/openapi.json), page at /auth-admin/
 * ```
 * `passwordHasher` must be the hasher the token endpoint verifies client secrets with (secrets are hashed
 * with it too, unless `hashClientSecret` is given).
 */
import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyServerOptions } from 'fastify';
import type { AuthorizationService } from '../authorization.ts';
import { type AuthPluginOptions, authPlugin } from '../middleware/fastify.ts';
import { ClientSecrets } from '../oauth/client-secrets.ts';
import { PasswordHasher } from '../passwords.ts';
import type { AuthStore } from '../store/types.ts';
import { registerAdminRoutes } from './api.ts';
import {
  adminErrorHandler,
  frameworkErrorCode,
  installValidation,
  requireJsonBody,
  sendError,
} from './http.ts';
import { type AdminPageOptions, registerAdminPage } from './page.ts';
import { noQuery } from './schemas.ts';

export type { AdminCaller } from './access.ts';
export { AdminPermission } from './access.ts';
export {
  ADMIN_ERROR_STATUS,
  type AdminErrorCode,
  AdminHttpError,
  SeparationOfDutiesError,
} from './http.ts';
export { type AdminPageOptions, DEFAULT_ADMIN_PAGE_CLIENT_ID, DEFAULT_ADMIN_PAGE_SCOPE } from './page.ts';

/** Default `BasePath` of the administration API and page (spec 001: default `/auth-admin`). */
export const DEFAULT_ADMIN_BASE_PATH = '/auth-admin';

/** Options of {@link adminApi}. */
export interface AdminApiOptions {
  /** `BasePath`: the API is served under `{basePath}/api`, the page at `{basePath}/`. Default `/auth-admin`. */
  basePath?: string;
  /** The auth core's store. */
  store: AuthStore;
  /**
   * The core's authorization engine (token verifier + store). The API registers the core's permission
   * middleware (`authPlugin`) with it, unless the parent instance already carries that middleware.
   */
  authorization: AuthorizationService;
  /** `OnDenied` of the permission middleware (spec 001): replaces the default denial body. */
  onDenied?: AuthPluginOptions['onDenied'];
  /** Hashes passwords set through the API. Default: a `PasswordHasher` with OWASP scrypt parameters. */
  passwordHasher?: PasswordHasher;
  /**
   * Hashes client secrets into what the token endpoint verifies. Default: `passwordHasher.hash`
   * (PHC-encoded scrypt).
   */
  hashClientSecret?: (secret: string) => Promise<string>;
  /**
   * The server's client-secret key (`oauth.clientSecretKey`): secrets of `client_secret_jwt` clients are
   * sealed with it (`oauth/client-secrets.ts`). Without it the API refuses `client_secret_jwt` (400).
   */
  clientSecretKey?: string;
  /** Clock, ms since epoch. Default `Date.now`. */
  now?: () => number;
  /** Largest accepted request body, bytes. Default 1 MiB. */
  bodyLimit?: number;
  /** The admin web page at `{basePath}/` (client and scope it signs in with), or `false` for none. */
  page?: AdminPageOptions | false;
}

/**
 * Normalizes a `BasePath`: leading `/`, no trailing `/`, segments of unreserved path characters (no `.`/`..`).
 * @throws TypeError when it is not a plain absolute path.
 */
export function normalizeBasePath(basePath: string | undefined): string {
  const raw = basePath ?? DEFAULT_ADMIN_BASE_PATH;
  const trimmed = `/${raw.trim().replace(/^\/+|\/+$/g, '')}`;
  const dotSegment = trimmed.split('/').some((segment) => segment === '.' || segment === '..');
  if (trimmed === '/' || dotSegment || !/^(\/[A-Za-z0-9._~-]+)+$/.test(trimmed)) {
    throw new TypeError(`basePath: '${raw}' is not an absolute path of A-Z a-z 0-9 . _ ~ - segments`);
  }
  return trimmed;
}

/** Longest path parameter the administration API needs (a permission code: 256 characters). */
export const ADMIN_MAX_PARAM_LENGTH = 256;

/**
 * Server-level Fastify options the administration API needs, to spread into `Fastify({...})` of the server
 * that registers {@link adminApi} (plugins cannot set them):
 * - `routerOptions.maxParamLength` {@link ADMIN_MAX_PARAM_LENGTH}: client ids (128) and permission codes (256) in paths
 *   (Fastify's default, 100, would answer 414 for valid long ones);
 * - `frameworkErrors`: a malformed URL (bad percent-encoding) or an over-long parameter under
 *   `{basePath}/api` is answered with the spec's `{ "error": "message" }` body (400 / 414) instead of Fastify's
 *   own shape; other paths go to `next` (default: Fastify's usual body).
 */
export function adminServerOptions(
  basePath?: string,
  next?: FastifyServerOptions['frameworkErrors'],
): Pick<FastifyServerOptions, 'routerOptions' | 'frameworkErrors'> {
  const prefix = `${normalizeBasePath(basePath)}/api`;
  return {
    routerOptions: { maxParamLength: ADMIN_MAX_PARAM_LENGTH },
    frameworkErrors(error, request, reply) {
      const url = request.raw.url ?? '';
      const status = error.statusCode ?? 400;
      if (url === prefix || url.startsWith(`${prefix}/`) || url.startsWith(`${prefix}?`)) {
        return sendError(reply, frameworkErrorCode(error), error.message);
      }
      if (next) return next(error, request, reply);
      const body = { error: 'Bad Request', code: error.code, message: error.message, statusCode: status };
      return (reply as FastifyReply).code(status).send(body);
    },
  };
}

/**
 * Fastify plugin serving the administration REST API under `{basePath}/api` (users, roles, permissions,
 * clients, audit; OpenAPI document at `{basePath}/api/openapi.json`) and the admin web page at `{basePath}/`.
 *
 * Register it without a `prefix` (it applies `basePath` itself). It is encapsulated: its validator, error
 * handler and not-found handler only apply to its own routes.
 * @throws TypeError at registration when `basePath` is invalid or `store`/`authorization` are missing.
 */
export const adminApi: FastifyPluginAsync<AdminApiOptions> = async (app: FastifyInstance, options) => {
  const basePath = normalizeBasePath(options.basePath);
  if (!options.store) throw new TypeError('adminApi: option `store` is required');
  if (!options.authorization) throw new TypeError('adminApi: option `authorization` is required');
  const passwordHasher = options.passwordHasher ?? new PasswordHasher();
  const hashClientSecret = options.hashClientSecret ?? ((secret: string) => passwordHasher.hash(secret));
  const clientSecrets = new ClientSecrets(passwordHasher, options.clientSecretKey);
  const now = options.now ?? Date.now;

  await app.register(
    async (api) => {
      // The permission middleware checks each route's `config.auth` in `onRequest` (before the body is read).
      if (!api.hasRequestDecorator('auth')) {
        await api.register(authPlugin, { service: options.authorization, onDenied: options.onDenied });
      }
      installValidation(api);
      api.setErrorHandler(adminErrorHandler);
      api.setNotFoundHandler((request, reply) =>
        sendError(reply, 'not_found', `no route ${request.method} ${request.url.split('?')[0]}`),
      );
      api.addHook('preParsing', requireJsonBody);
      // Answers carry account data and, once, generated secrets: never stored by caches (RFC 9111 §5.2.2.5).
      api.addHook('onSend', async (_request, reply, payload) => {
        reply.header('cache-control', 'no-store');
        return payload;
      });
      const bodyLimit = options.bodyLimit ?? 1024 * 1024;
      api.addHook('onRoute', (route) => {
        route.bodyLimit ??= bodyLimit;
        if (route.schema && !route.schema.querystring) route.schema.querystring = noQuery;
      });
      await api.register(swagger, {
        // Bodies that may be absent (`type` includes null) are optional in the document.
        transformObject: (documents) =>
          markOptionalBodies('openapiObject' in documents ? documents.openapiObject : {}),
        openapi: {
          openapi: '3.1.0',
          info: {
            title: 'Auth service administration API',
            description:
              'Administration REST API of the authorization and token service (spec 001). Errors: `{ "error": "message" }` with 400 (validation, body not JSON, permission code that cannot be normalized, storage constraint), 403 (separation of duties), 404, 409; 401/403 of the permission middleware carry `{ error, error_description, permission }`.',
            version: '1.0.0',
          },
          servers: [{ url: '/' }],
          components: {
            securitySchemes: {
              bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
            },
          },
        },
      });
      registerAdminRoutes(api, {
        store: options.store,
        passwordHasher,
        hashClientSecret,
        clientSecrets,
        now,
      });
      api.get('/openapi.json', { schema: { hide: true } }, async () => api.swagger());
    },
    { prefix: `${basePath}/api` },
  );
  if (options.page !== false) {
    const page = options.page;
    await app.register(async (web) => registerAdminPage(web, basePath, page));
  }
};

type Operation = {
  requestBody?: { required?: boolean; content?: Record<string, { schema?: { type?: unknown } }> };
};

/** Marks request bodies whose schema admits `null` (no body) as not required (OpenAPI 3.1 §4.8.13). */
function markOptionalBodies<T>(document: T): T {
  const paths = (document as { paths?: Record<string, Record<string, Operation>> }).paths ?? {};
  for (const operations of Object.values(paths)) {
    for (const operation of Object.values(operations)) {
      const type = operation.requestBody?.content?.['application/json']?.schema?.type;
      if (operation.requestBody && Array.isArray(type) && type.includes('null'))
        operation.requestBody.required = false;
    }
  }
  return document;
}
