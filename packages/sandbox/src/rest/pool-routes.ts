/**
 * Warm pools kept by the REST runtime server (`runtime/pool.ts`), as a Fastify plugin: a pool
 * created here keeps `size` boxes of its options running in the server's runtime, and `POST /v1/boxes`
 * with matching options hands one out (the server runtime's `create` does the matching). Pools live as
 * long as the server: `close()` removes the boxes they hold ready.
 *
 * | Route | Permission | What |
 * |---|---|---|
 * | `POST /v1/pools` `{ image, size, options?, id? }` | `sandbox.boxes.write` | create → 201 pool |
 * | `GET /v1/pools`, `GET /v1/pools/{pool}` | `sandbox.boxes.read` | list, get |
 * | `GET /v1/pools/{pool}/filled` | `sandbox.boxes.read` | waits until `size` boxes are ready → pool |
 * | `DELETE /v1/pools/{pool}` | `sandbox.boxes.write` | close: ready boxes and those still being created removed → 204 |
 *
 * A pool belongs to the caller's tenant: another tenant's pool is 404, lists show the caller's
 * (every tenant's for the operator), and only the tenant's own box creations take its ready boxes
 * ({@link ServerPools.runtimePoolIds}, used by `ServerContext.createWith`).
 */
import type { FastifyInstance, FastifySchema } from 'fastify';
import { ulid } from 'ulid';
import { BoxError, notFound } from '../errors.ts';
import type { JsRuntime } from '../js-runtime.ts';
import { validateBoxOptions } from '../runtime/options.ts';
import { type JsBoxPool, MAX_POOL_SIZE, type PoolSpec } from '../runtime/pool.ts';
import type { JsBoxOptions } from '../types.ts';
import type { Principal } from './auth.ts';
import { principalOf } from './hooks.ts';
import { route } from './openapi.ts';
import { obj, ref } from './schemas.ts';
import { type Admission, boxRequestOf } from './tenancy/admission.ts';
import { validatorCompiler } from './validation.ts';
import { Permission, toCamel, toSnake } from './wire.ts';

/** A pool id: a ULID. */
export const POOL_ID = '^[0-9A-HJKMNP-TV-Z]{26}$';

interface Entry {
  /** The tenant that created the pool. */
  tenant: string;
  pool: JsBoxPool;
  image: string;
  options: Omit<JsBoxOptions, 'image'>;
}

/** The body of `POST /v1/pools`, with `options` described by `options`. */
function poolBody(options: Record<string, unknown>): Record<string, unknown> {
  return {
    ...obj(
      {
        image: { type: 'string', minLength: 1 },
        size: { type: 'integer', minimum: 1, maximum: MAX_POOL_SIZE },
        options,
        id: { type: 'string', pattern: POOL_ID, description: 'pool id chosen by the client' },
      },
      ['image', 'size'],
    ),
    additionalProperties: false,
  };
}

/** What the validator checks of the body; `options` itself is checked by `validateBoxOptions`. */
const POOL_BODY_CHECK = poolBody({ type: 'object' });

const poolParams = obj({ pool: { type: 'string', description: 'pool id (ULID)' } }, ['pool']);
const answer = { description: 'the pool', ...ref('Pool') };

/** The pools of one server. */
export class ServerPools {
  readonly #runtime: JsRuntime;
  readonly #admission: Admission | undefined;
  readonly #pools = new Map<string, Entry>();
  /** Pool ids being admitted. */
  readonly #creating = new Set<string>();

  /**
   * @param runtime the server's runtime, which keeps the pools and hands their boxes out.
   * @param admission counts the ready boxes of each pool as its tenant's running boxes (quotas and node).
   */
  constructor(runtime: JsRuntime, admission?: Admission) {
    this.#runtime = runtime;
    this.#admission = admission;
  }

  /** Closes every pool (their ready boxes are removed). */
  async close(): Promise<void> {
    const entries = [...this.#pools.values()];
    for (const id of this.#pools.keys()) this.#admission?.releasePool(id);
    this.#pools.clear();
    await Promise.all(entries.map((entry) => entry.pool.close().catch(() => {})));
  }

  /** Runtime ids (`JsBoxPool.id`) of `tenant`'s pools: the pools its box creations may take from. */
  runtimePoolIds(tenant: string): ReadonlySet<string> {
    const ids = new Set<string>();
    for (const entry of this.#pools.values()) if (entry.tenant === tenant) ids.add(entry.pool.id);
    return ids;
  }

  #get(id: string, principal: Principal): Entry {
    const entry = this.#pools.get(id);
    if (!entry || !(principal.operator || entry.tenant === principal.tenant))
      throw notFound(`no pool '${id}'`);
    return entry;
  }

  #wire(id: string, entry: Entry): unknown {
    return {
      id,
      image: entry.image,
      size: entry.pool.size,
      ready: entry.pool.ready(),
      options: toSnake(entry.options),
    };
  }

  /**
   * Creates a pool in the server's runtime for `principal`'s tenant; its `size` ready boxes are admitted
   * as that tenant's running boxes (quotas and node, as `POST /v1/boxes`). Host paths (`rootfsPath`,
   * bind mounts) are refused as for `POST /v1/boxes`.
   * @throws BoxError `invalid_option` naming the field, `conflict` for a taken id, `quota_exceeded`,
   *   `capacity`.
   */
  async #create(
    body: { image: string; size: number; options?: Record<string, unknown>; id?: string },
    principal: Principal,
  ): Promise<string> {
    const id = body.id ?? ulid();
    if (this.#pools.has(id) || this.#creating.has(id))
      throw new BoxError(`a pool '${id}' exists`, { code: 'conflict', field: 'id' });
    const options = toCamel<Omit<JsBoxOptions, 'image'>>(body.options ?? {});
    validateBoxOptions({ ...options, image: body.image }, { allowHostBinds: false });
    this.#creating.add(id);
    try {
      await this.#admission?.admitPool(
        id,
        principal.tenant,
        principal.operator,
        boxRequestOf(options),
        body.size,
      );
    } finally {
      this.#creating.delete(id);
    }
    const spec: PoolSpec = { image: body.image, size: body.size, options };
    this.#pools.set(id, {
      tenant: principal.tenant,
      pool: this.#runtime.pool(spec),
      image: body.image,
      options,
    });
    return id;
  }

  /** The route plugin (see the module comment). */
  readonly routes = async (app: FastifyInstance): Promise<void> => {
    const tags = ['pools'];
    app.post<{ Body: { image: string; size: number; options?: Record<string, unknown>; id?: string } }>(
      '/v1/pools',
      {
        ...route(Permission.boxesWrite, {
          tags,
          summary: 'create a warm pool',
          description:
            'Keeps `size` boxes of `image` and `options` created and running; `POST /v1/boxes` with the same options (name and lifetimes aside) hands one out at once, and the pool refills in the background. `secrets` and `ports` are refused.',
          body: poolBody({
            ...ref('BoxOptions'),
            description: 'the other box options (as `POST /v1/boxes`, without image)',
          }),
          response: { 201: answer },
          errors: [409, 429, 503],
        }),
        // `options` is checked by the box option rules (errors name the camelCase option, as locally).
        validatorCompiler: (part) =>
          validatorCompiler(
            part.httpPart === 'body' ? { ...part, schema: POOL_BODY_CHECK as FastifySchema } : part,
          ),
      },
      async (request, reply) => {
        const principal = principalOf(request);
        const id = await this.#create(request.body, principal);
        return reply.code(201).send(this.#wire(id, this.#get(id, principal)));
      },
    );

    app.get(
      '/v1/pools',
      route(Permission.boxesRead, {
        tags,
        summary: 'list the warm pools',
        response: { 200: { description: 'pools', type: 'array', items: ref('Pool') } },
      }),
      async (request) => {
        const principal = principalOf(request);
        return [...this.#pools]
          .filter(([, entry]) => principal.operator || entry.tenant === principal.tenant)
          .map(([id, entry]) => this.#wire(id, entry));
      },
    );

    app.get<{ Params: { pool: string } }>(
      '/v1/pools/:pool',
      route(Permission.boxesRead, {
        tags,
        summary: 'a warm pool',
        params: poolParams,
        response: { 200: answer },
      }),
      async (request) =>
        this.#wire(request.params.pool, this.#get(request.params.pool, principalOf(request))),
    );

    app.get<{ Params: { pool: string } }>(
      '/v1/pools/:pool/filled',
      route(Permission.boxesRead, {
        tags,
        summary: 'wait until the pool holds `size` ready boxes',
        description: 'Answers once it does; a refill that failed (image, options) is answered as its error.',
        params: poolParams,
        response: { 200: answer },
        errors: [409, 422],
      }),
      async (request) => {
        const entry = this.#get(request.params.pool, principalOf(request));
        await entry.pool.filled();
        return this.#wire(request.params.pool, entry);
      },
    );

    app.delete<{ Params: { pool: string } }>(
      '/v1/pools/:pool',
      route(Permission.boxesWrite, {
        tags,
        summary: 'close a warm pool',
        description: 'Removes the boxes it holds ready; boxes it handed out stay.',
        params: poolParams,
        response: { 204: { description: 'closed', type: 'null' } },
      }),
      async (request, reply) => {
        const entry = this.#get(request.params.pool, principalOf(request));
        this.#pools.delete(request.params.pool);
        this.#admission?.releasePool(request.params.pool);
        await entry.pool.close();
        return reply.code(204).send();
      },
    );
  };
}
