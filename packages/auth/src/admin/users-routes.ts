/**
 * Administration API: users (`/users`, `/users/{id}`, password, enable/disable/unlock), spec 001 "Administration REST API".
 */
import type { FastifyInstance } from 'fastify';
import type { UserPatch, UserProfileInput, UserRecord } from '../store/types.ts';
import { type AdminTarget, profileOf, USER_GRANTS } from './grants.ts';
import { errors, noContent, routeOptions } from './route-docs.ts';
import type { RouteKit } from './route-kit.ts';
import * as s from './schemas.ts';
import { userView } from './views.ts';

/** Registers the routes on the API's encapsulated context. */
export function registerUserRoutes(app: FastifyInstance, kit: RouteKit): void {
  const {
    store,
    passwordHasher,
    now,
    P,
    auditFor,
    guardCreate,
    created,
    listRoute,
    getRoute,
    updateRoute,
    deleteRoute,
    users,
  } = kit;
  // ── users ──

  listRoute(users, 'List users (paged, by user name)', 'A page of users');
  getRoute(users, 'Get a user', 'The user');

  type NewUserBody = UserProfileInput & {
    userName: string;
    password?: string;
    isEnabled?: boolean;
    roles?: string[];
    directPermissions?: string[];
    deniedPermissions?: string[];
  };

  app.post<{ Body: NewUserBody }>(
    '/users',
    routeOptions('users', P.Users, {
      summary: 'Create a user',
      description:
        'Needs `auth.admin.users`; non-empty `roles` also `auth.admin.roles`, non-empty `directPermissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties).',
      body: s.createUserBody,
      response: { 201: { description: 'Created: the user', ...s.userSchema }, ...errors(409) },
    }),
    async (request, reply) => {
      const body = request.body;
      const target: AdminTarget = { type: 'user', name: body.userName };
      const grants = await guardCreate(request, 'user.create', target, USER_GRANTS, { ...body });
      const roles = grants.roles ?? [];
      const passwordHash = body.password === undefined ? null : await passwordHasher.hash(body.password);
      const changed = Object.keys(body).filter((k) => k !== 'password');
      if (body.password !== undefined) changed.push('password');
      const fields = {
        userName: body.userName,
        isEnabled: body.isEnabled,
        roles,
        directPermissions: grants.directPermissions,
        deniedPermissions: grants.deniedPermissions,
        ...profileOf(body),
      };
      const user = await store.createUser(
        { ...fields, passwordHash },
        auditFor(request, 'user.create', target, changed, fields),
      );
      return created(reply, users, user, userView(user, now()));
    },
  );

  updateRoute<UserRecord, UserPatch, Omit<NewUserBody, 'password' | 'userName'> & { userName?: string }>(
    users,
    {
      summary: 'Update a user (omitted fields stay unchanged)',
      description:
        'Needs `auth.admin.users`; changing `roles` also `auth.admin.roles`, changing `directPermissions`/`deniedPermissions` also `auth.admin.permissions` (separation of duties). `isEnabled: false` disables the account and refuses its tokens at once.',
      body: s.updateUserBody,
      response: { 200: { description: 'The user', ...s.userSchema }, ...errors(404, 409) },
    },
    USER_GRANTS,
    (body) => ({ userName: body.userName, isEnabled: body.isEnabled, ...profileOf(body) }),
  );

  deleteRoute(users, 'Delete a user');

  app.put<{ Params: { id: string }; Body: { password: string } }>(
    '/users/:id/password',
    routeOptions('users', P.Users, {
      summary: "Set a user's password",
      description:
        'Changes the security stamp: tokens issued before are refused with `SubjectDisabled` (spec 001 "States and transitions").',
      params: s.idParams,
      body: s.setPasswordBody,
      response: { ...noContent, ...errors(404) },
    }),
    async (request, reply) => {
      const current = await users.find(request.params.id);
      const hash = await passwordHasher.hash(request.body.password);
      await store.setPasswordHash(
        current.id,
        hash,
        auditFor(request, 'user.password', users.target(current), ['password']),
      );
      return reply.code(204).send();
    },
  );

  for (const [action, summary] of [
    ['enable', 'Enable a user (IsEnabled = true)'],
    ['disable', 'Disable a user (IsEnabled = false; its tokens are refused at once)'],
    ['unlock', 'End a lockout and reset the failure count'],
  ] as const) {
    app.post<{ Params: { id: string } }>(
      `/users/:id/${action}`,
      routeOptions('users', P.Users, {
        summary,
        params: s.idParams,
        body: s.emptyBody,
        response: { 200: { description: 'The user', ...s.userSchema }, ...errors(404) },
      }),
      async (request) => {
        const current = await users.find(request.params.id);
        const audit = auditFor(
          request,
          `user.${action}`,
          users.target(current),
          action === 'unlock' ? ['lockoutEnd'] : ['isEnabled'],
          action === 'unlock' ? { lockoutEnd: null } : { isEnabled: action === 'enable' },
        );
        const user =
          action === 'unlock'
            ? await store.unlockUser(current.id, audit)
            : await store.updateUser(current.id, { isEnabled: action === 'enable' }, audit);
        return userView(user, now());
      },
    );
  }
}
