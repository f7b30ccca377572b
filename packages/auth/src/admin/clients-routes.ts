/**
 * Administration API: clients (`/clients`, secret rotation, OAuth extension settings `PUT /clients/{clientId}/metadata`), spec 001 "Administration REST API".
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ValidationError } from '../errors.ts';
import { isSealedSecret } from '../oauth/client-secrets.ts';
import type { ClientMetadata, ClientPatch, ClientRecord } from '../store/types.ts';
import { type AdminTarget, CLIENT_GRANTS } from './grants.ts';
import { AdminHttpError } from './http.ts';
import { errors, routeOptions } from './route-docs.ts';
import type { RouteKit } from './route-kit.ts';
import * as s from './schemas.ts';
import { clientView } from './views.ts';

/** Registers the routes on the API's encapsulated context. */
export function registerClientRoutes(app: FastifyInstance, kit: RouteKit): void {
  const {
    store,
    hashClientSecret,
    clientSecrets,
    P,
    auditFor,
    guardCreate,
    created,
    listRoute,
    getRoute,
    updateRoute,
    deleteRoute,
    clients,
  } = kit;
  // ── clients ──

  const newSecret = () => randomBytes(32).toString('base64url');

  listRoute(clients, 'List clients (paged, by client id)', 'A page of clients');
  getRoute(clients, 'Get a client', 'The client');

  type ClientBody = {
    clientId: string;
    displayName?: string;
    clientType: 'public' | 'confidential';
    clientSecret?: string;
    isEnabled?: boolean;
    redirectUris?: string[];
    allowedGrantTypes?: string[];
    allowedScopes?: string[];
    permissions?: string[];
    postLogoutRedirectUris?: string[];
    backchannelLogoutUri?: string | null;
    requireConsent?: boolean;
  };

  app.post<{ Body: ClientBody }>(
    '/clients',
    routeOptions('clients', P.Clients, {
      summary: 'Register a client',
      description:
        'Needs `auth.admin.clients`; non-empty `permissions` also `auth.admin.permissions` (separation of duties). A confidential client without `clientSecret` gets a generated one, returned once as `clientSecret`.',
      body: s.createClientBody,
      response: {
        201: {
          description: 'Created: the client (with `clientSecret` when one was generated)',
          ...s.clientWithSecretSchema,
        },
        ...errors(409),
      },
    }),
    async (request, reply) => {
      const { clientSecret, ...body } = request.body;
      if (body.clientType === 'public' && clientSecret !== undefined) {
        throw new ValidationError(
          'clientSecret',
          'public_client',
          'clientSecret: a public client has no secret',
        );
      }
      const target: AdminTarget = { type: 'client', id: body.clientId };
      const { permissions: granted } = await guardCreate(
        request,
        'client.create',
        target,
        CLIENT_GRANTS,
        body,
      );
      const secret = body.clientType === 'confidential' ? (clientSecret ?? newSecret()) : undefined;
      const changed = Object.keys(body);
      if (secret !== undefined) changed.push('clientSecret');
      const client = await store.createClient(
        {
          ...body,
          permissions: granted,
          secretHash: secret === undefined ? null : await hashClientSecret(secret),
        },
        auditFor(request, 'client.create', target, changed, { ...body, permissions: granted }),
      );
      const view = clientView(client);
      return created(
        reply,
        clients,
        client,
        clientSecret === undefined && secret !== undefined ? { ...view, clientSecret: secret } : view,
      );
    },
  );

  updateRoute<
    ClientRecord,
    ClientPatch,
    Omit<Partial<ClientBody>, 'clientId' | 'clientType' | 'clientSecret'>
  >(
    clients,
    {
      summary: 'Update a client (omitted fields stay unchanged)',
      description:
        'Needs `auth.admin.clients`; changing `permissions` also `auth.admin.permissions` (separation of duties). Rotate the secret with `POST /clients/{clientId}/secret`.',
      body: s.updateClientBody,
      response: { 200: { description: 'The client', ...s.clientSchema }, ...errors(404) },
    },
    CLIENT_GRANTS,
    ({ permissions: _granted, ...rest }) => ({ ...rest }),
  );

  app.post<{ Params: { clientId: string }; Body: { clientSecret?: string } | undefined }>(
    '/clients/:clientId/secret',
    routeOptions('clients', P.Clients, {
      summary: "Replace a confidential client's secret",
      description:
        'Without a body (or without `clientSecret`) a random secret is generated and returned once as `clientSecret`. A `client_secret_jwt` client gets its secret sealed (AES-256-GCM under the server key), others a scrypt hash.',
      params: s.clientIdParams,
      body: s.rotateSecretBody,
      response: {
        200: {
          description: 'The client (with `clientSecret` when one was generated)',
          ...s.clientWithSecretSchema,
        },
        ...errors(404),
      },
    }),
    async (request) => {
      const current = await clients.find(request.params.clientId);
      if (current.clientType !== 'confidential') {
        throw new AdminHttpError('validation', `client '${current.clientId}': a public client has no secret`);
      }
      const given = request.body?.clientSecret;
      const secret = given ?? newSecret();
      const client = await store.updateClient(
        current.clientId,
        { secretHash: await storedSecret(current, secret, current.metadata.tokenEndpointAuthMethod) },
        auditFor(request, 'client.secret', clients.target(current), ['clientSecret']),
      );
      const view = clientView(client);
      return given === undefined ? { ...view, clientSecret: secret } : view;
    },
  );

  app.put<{ Params: { clientId: string }; Body: ClientMetadata }>(
    '/clients/:clientId/metadata',
    routeOptions('clients', P.Clients, {
      summary: "Replace a client's OAuth extension settings",
      description:
        'DPoP required, PAR required, token endpoint authentication method and keys (`private_key_jwt`), resource indicators, token exchange policy. `{}` clears them. Choosing `client_secret_jwt` for a client whose secret is hashed issues a new secret, stored sealed and returned once as `clientSecret`; leaving it stores the same secret hashed again.',
      params: s.clientIdParams,
      body: s.clientMetadataSchema,
      response: {
        200: {
          description: 'The client (with `clientSecret` when choosing `client_secret_jwt` issued one)',
          ...s.clientWithSecretSchema,
        },
        ...errors(404),
      },
    }),
    async (request) => {
      const current = await clients.find(request.params.clientId);
      const method = request.body.tokenEndpointAuthMethod;
      const changed = Object.keys(request.body);
      // The stored secret follows the method: client_secret_jwt needs it sealed (a new secret is issued,
      // since a hashed one cannot be recovered); leaving client_secret_jwt re-hashes the same secret.
      let issued: string | undefined;
      let secretHash: string | undefined;
      if (method === 'client_secret_jwt') {
        if (current.clientType !== 'confidential')
          throw new ValidationError(
            'tokenEndpointAuthMethod',
            'public_client',
            'tokenEndpointAuthMethod: client_secret_jwt needs a confidential client',
          );
        if (!isSealedSecret(current.secretHash)) {
          issued = newSecret();
          secretHash = await storedSecret(current, issued, method);
        }
      } else if (current.secretHash !== null && isSealedSecret(current.secretHash)) {
        const secret = clientSecrets.open(current.clientId, current.secretHash);
        if (secret) secretHash = await hashClientSecret(secret.toString('utf8'));
      }
      if (secretHash !== undefined) changed.push('clientSecret');
      const audit = auditFor(request, 'client.metadata', clients.target(current), changed, request.body);
      // The settings first (the store validates them, 400 leaves everything unchanged), then the secret;
      // the settings' audit event names both.
      let client = await store.setClientMetadata(current.clientId, request.body, audit);
      if (secretHash !== undefined) client = await store.updateClient(current.clientId, { secretHash });
      const view = clientView(client);
      return issued === undefined ? view : { ...view, clientSecret: issued };
    },
  );

  /**
   * The stored form of a new secret for `client` under `method` (sealed for `client_secret_jwt`).
   * @throws ValidationError (400) for `client_secret_jwt` without the server's client-secret key.
   */
  async function storedSecret(
    client: ClientRecord,
    secret: string,
    method: ClientMetadata['tokenEndpointAuthMethod'],
  ): Promise<string> {
    if (method !== 'client_secret_jwt') return hashClientSecret(secret);
    if (!clientSecrets.sealingEnabled)
      throw new ValidationError(
        'tokenEndpointAuthMethod',
        'unsupported',
        'tokenEndpointAuthMethod: client_secret_jwt needs the server client-secret key (AUTH_CLIENT_SECRET_KEY)',
      );
    return clientSecrets.store(client.clientId, secret, method);
  }

  deleteRoute(clients, 'Delete a client (and its refresh tokens and authorization codes)');
}
