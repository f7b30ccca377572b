/**
 * OpenAPI and permission plumbing shared by the administration API's route modules: each route's Fastify
 * options (`config.auth` for the permission middleware, `schema` for validation and the OpenAPI document).
 */
import * as s from './schemas.ts';

/** An RFC 3339 time of a ms-epoch number. */
export const iso = (ms: number) => new Date(ms).toISOString();

/** The 401/403 answer of the permission middleware (OpenAPI). */
export const denial = {
  description: 'Permission middleware refusal (spec 001 denial body)',
  ...s.denialSchema,
};
/** The error answers of a route (OpenAPI): 400, 401, 403 and the given `codes` (404, 409, …). */
export const errors = (...codes: number[]) => {
  const out: Record<number, unknown> = {
    400: { description: 'Validation failure', ...s.errorSchema },
    401: denial,
    403: { description: 'Missing permission or separation-of-duties rule', ...s.denialSchema },
  };
  for (const code of codes) {
    out[code] = {
      description: code === 404 ? 'Not found' : code === 409 ? 'Uniqueness conflict' : 'Error',
      ...s.errorSchema,
    };
  }
  return out;
};
/** A JSON Schema object. */
export type Schema = Record<string, unknown>;
/** The 204 answer (OpenAPI). */
export const noContent = { 204: { description: 'Done', type: 'null' } };
/** The bearer-token security requirement (OpenAPI). */
export const bearer = [{ bearerAuth: [] }];

/** The OpenAPI part of one route (`schema` of its Fastify options), in the document's field order. */
export interface RouteDoc {
  readonly summary: string;
  readonly description?: string;
  readonly params?: Schema;
  readonly querystring?: Schema;
  readonly body?: Schema;
  readonly response: Record<number, unknown>;
}

/**
 * Fastify options of one admin route: the permission it needs (`config.auth`; `alsoGrantedBy` codes that
 * satisfy it too) and its OpenAPI schema.
 */
export function routeOptions(
  tag: string,
  permission: string,
  doc: RouteDoc,
  alsoGrantedBy?: readonly string[],
) {
  const { summary, description, params, querystring, body, response } = doc;
  return {
    config: { auth: alsoGrantedBy ? { permission, alsoGrantedBy } : { permission } },
    schema: {
      tags: [tag],
      summary,
      ...(description === undefined ? {} : { description }),
      security: bearer,
      ...(params === undefined ? {} : { params }),
      ...(querystring === undefined ? {} : { querystring }),
      ...(body === undefined ? {} : { body }),
      response,
    },
  };
}

/**
 * The read rule of a resource: `auth.admin.read`, or the resource's manage permission (the right to manage
 * a resource includes the right to read it). A deny rule on `auth.admin.read` still wins.
 */
export const readRule = (manage: string) =>
  `Needs \`auth.admin.read\` or \`${manage}\` (managing includes reading); a deny rule on \`auth.admin.read\` wins.`;
