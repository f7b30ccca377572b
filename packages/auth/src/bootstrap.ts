/**
 * First-start seeding of an empty store (spec 001): an administrator and the two demo clients.
 * Called by `buildAuthServer` once the issuer is known; safe when several instances start together on one
 * empty database.
 */
import { randomBytes } from 'node:crypto';
import { ConflictError } from './errors.ts';
import type { PasswordHasher } from './passwords.ts';
import { ADMINISTRATOR_ROLE_NAME } from './store/migrations.ts';
import type { AuthStore, ClientRecord, UserRecord } from './store/types.ts';

/** Id of the bootstrap public client (authorization code + PKCE, refresh). */
export const DEMO_SPA_CLIENT_ID = 'demo-spa';
/** Id of the bootstrap confidential client (password, client credentials, refresh). */
export const DEMO_SERVICE_CLIENT_ID = 'demo-service';

/** What to create on an empty store. */
export interface BootstrapOptions {
  /** Administrator user name (`AUTH_ADMIN_USERNAME`, default `admin`). */
  adminUserName?: string;
  /** Administrator password (`AUTH_ADMIN_PASSWORD`); generated when absent. */
  adminPassword?: string;
  /** Secret of `demo-service` (`AUTH_DEMO_CLIENT_SECRET`); generated when absent. */
  demoClientSecret?: string;
  /** Redirect URIs of `demo-spa` (default: localhost callbacks, see {@link demoSpaRedirectUris}). */
  demoSpaRedirectUris?: readonly string[];
}

/** What {@link bootstrapStore} created; generated secrets are returned once so the caller can print them. */
export interface BootstrapResult {
  readonly admin?: { readonly user: UserRecord; readonly generatedPassword?: string };
  readonly clients: readonly ClientRecord[];
  readonly generatedDemoClientSecret?: string;
}

/** Redirect URIs of `demo-spa`: the admin page of this server and common local SPA dev ports. */
export function demoSpaRedirectUris(issuer: string, adminBasePath = '/auth-admin'): string[] {
  return [
    `${issuer}${adminBasePath}/`,
    'http://localhost:3000/callback',
    'http://127.0.0.1:3000/callback',
    'http://localhost:5173/callback',
    'http://127.0.0.1:5173/callback',
  ];
}

const generated = () => randomBytes(18).toString('base64url');

/**
 * Seeds an empty store (spec 001): with no user, an administrator holding the built-in
 * `administrator` role (`auth.admin.**`); with no client, `demo-spa` (public: authorization code + PKCE,
 * refresh) and `demo-service` (confidential: password, client credentials, refresh). Missing secrets are
 * generated and returned (never logged here).
 */
export async function bootstrapStore(
  store: AuthStore,
  hasher: PasswordHasher,
  issuer: string,
  options: BootstrapOptions = {},
  adminBasePath = '/auth-admin',
): Promise<BootstrapResult> {
  let admin: BootstrapResult['admin'];
  // Instances starting together on one empty database race here: the loser's create is a ConflictError
  // (unique names), and the record the winner made stands.
  const unlessSeeded = <T>(create: Promise<T>): Promise<T | undefined> =>
    create.catch((error: unknown) => {
      if (error instanceof ConflictError) return undefined;
      throw error;
    });
  if ((await store.listUsers({ limit: 1 })).total === 0) {
    const password = options.adminPassword ?? generated();
    const user = await unlessSeeded(
      store.createUser(
        {
          userName: options.adminUserName ?? 'admin',
          passwordHash: await hasher.hash(password),
          roles: [ADMINISTRATOR_ROLE_NAME],
        },
        {
          audit: {
            category: 'Admin',
            outcome: 'Success',
            failureCode: null,
            details: { action: 'bootstrap.admin' },
          },
        },
      ),
    );
    if (user) admin = { user, generatedPassword: options.adminPassword === undefined ? password : undefined };
  }
  const clients: ClientRecord[] = [];
  let generatedDemoClientSecret: string | undefined;
  if ((await store.listClients({ limit: 1 })).total === 0) {
    const spa = await unlessSeeded(
      store.createClient({
        clientId: DEMO_SPA_CLIENT_ID,
        displayName: 'Demo single-page app',
        clientType: 'public',
        redirectUris: options.demoSpaRedirectUris ?? demoSpaRedirectUris(issuer, adminBasePath),
        postLogoutRedirectUris: [`${issuer}${adminBasePath}/`],
        allowedGrantTypes: ['authorization_code', 'refresh_token'],
        allowedScopes: ['openid', 'profile', 'email', 'roles', 'offline_access'],
      }),
    );
    if (spa) clients.push(spa);
    const secret = options.demoClientSecret ?? generated();
    const service = await unlessSeeded(
      store.createClient({
        clientId: DEMO_SERVICE_CLIENT_ID,
        displayName: 'Demo service',
        clientType: 'confidential',
        secretHash: await hasher.hash(secret),
        allowedGrantTypes: ['password', 'client_credentials', 'refresh_token'],
        allowedScopes: ['openid', 'profile', 'email', 'roles', 'offline_access', 'api'],
      }),
    );
    if (service) {
      clients.push(service);
      if (options.demoClientSecret === undefined) generatedDemoClientSecret = secret;
    }
  }
  return { admin, clients, generatedDemoClientSecret };
}
