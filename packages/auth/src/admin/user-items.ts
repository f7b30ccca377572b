/**
 * The two routes of a collection that belongs to a user (`{BasePath}/api/users/{id}/…`: links to upstream
 * accounts, consents, passkeys): list it, and remove one item. The user is looked up first (404 when
 * there is none); reading needs `auth.admin.read` or `auth.admin.users`, removing `auth.admin.users`.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuthStore, ChangeOptions, UserRecord } from '../store/types.ts';
import { AdminPermission as P } from './access.ts';
import type { AdminTarget } from './grants.ts';
import { AdminHttpError } from './http.ts';
import { errors, noContent, readRule, routeOptions } from './route-docs.ts';
import type { Schema } from './schema-parts.ts';
import * as s from './schemas.ts';

/** What the routes of a user collection need of `registerAdminRoutes`. */
export interface UserRoutesContext {
  readonly store: AuthStore;
  /** The user with that id. @throws AdminHttpError `not_found` (404). */
  findUser(id: string): Promise<UserRecord>;
  /** The audit target of a user. */
  target(user: UserRecord): AdminTarget;
  /** The audit event of a change by the request's caller (to pass to the store's change, or append). */
  auditFor(
    request: FastifyRequest,
    action: string,
    target: AdminTarget,
    changed: string[],
    values?: object,
  ): ChangeOptions;
}

/** One page holding the whole collection (`offset` 0, `limit` as the route answers it). */
export interface UserItems {
  readonly items: readonly unknown[];
  readonly total: number;
  readonly limit: number;
}

/** `GET /users/:id/{path}` and `DELETE /users/:id/{path}/:{param}` of one user collection. */
export interface UserItemRoutes {
  /** The user with that id. @throws AdminHttpError `not_found` (404). */
  readonly findUser: (id: string) => Promise<UserRecord>;
  /** The collection's path segment after `/users/:id/`. */
  readonly path: string;
  readonly list: {
    readonly summary: string;
    /** Description of the 200 answer (the order of the items). */
    readonly answer: string;
    /** Schema of one item. */
    readonly item: Schema;
    /** The items of user `userId` as the API shows them. */
    read(userId: string): Promise<UserItems>;
  };
  readonly remove: {
    readonly summary: string;
    /** Name of the item's key parameter. */
    readonly param: string;
    /** Schema of the route's `id` and `{param}` parameters. */
    readonly params: Schema;
    /**
     * Removes item `key` of `user`, with its audit event. @returns false when the user has no such item
     * (answered 404 with {@link UserItemRoutes.remove.notFound}).
     */
    apply(request: FastifyRequest, user: UserRecord, key: string): Promise<boolean>;
    /** The 404 message for item `key` of user `userId`. */
    notFound(userId: string, key: string): string;
  };
}

/** Registers the list and the removal route of a user collection (see the module comment). */
export function registerUserItemRoutes(app: FastifyInstance, routes: UserItemRoutes): void {
  const { findUser, path, list, remove } = routes;
  app.get<{ Params: { id: string } }>(
    `/users/:id/${path}`,
    routeOptions(
      'users',
      P.Read,
      {
        summary: list.summary,
        description: readRule(P.Users),
        params: s.idParams,
        response: { 200: { description: list.answer, ...s.pageOf(list.item) }, ...errors(404) },
      },
      [P.Users],
    ),
    async (request) => {
      const user = await findUser(request.params.id);
      const { items, total, limit } = await list.read(user.id);
      return { items, total, offset: 0, limit };
    },
  );

  app.delete<{ Params: Record<string, string> }>(
    `/users/:id/${path}/:${remove.param}`,
    routeOptions('users', P.Users, {
      summary: remove.summary,
      params: remove.params,
      body: s.emptyBody,
      response: { ...noContent, ...errors(404) },
    }),
    async (request, reply) => {
      const user = await findUser(request.params.id as string);
      const key = request.params[remove.param] as string;
      if (!(await remove.apply(request, user, key))) {
        throw new AdminHttpError('not_found', remove.notFound(user.id, key));
      }
      return reply.code(204).send();
    },
  );
}
