/**
 * The network policy of a box over REST: `PUT /v1/boxes/{box}/network` (and `PATCH`, the same)
 * `{ allow_net }` replaces the outbound allowlist of the box (`box.network.update`, spec 002
 * `NetworkSpec.allowNet` rules), while it runs and for its later starts, and answers the rules in force.
 */
import type { FastifyInstance } from 'fastify';
import type { ServerContext } from './context.ts';
import { principalOf } from './hooks.ts';
import { route } from './openapi.ts';
import { obj } from './schemas.ts';
import { Permission } from './wire.ts';

/** Most `allow_net` rules one update may carry. */
export const MAX_ALLOW_NET_RULES = 1024;

const allowNetSchema = {
  type: 'array',
  maxItems: MAX_ALLOW_NET_RULES,
  items: { type: 'string', minLength: 1, maxLength: 300 },
  description: 'hostnames (`*.` wildcards), IP addresses and CIDR blocks; `[]` is full outbound access',
};

/** Registers `PUT` and `PATCH /v1/boxes/{box}/network` (permission `sandbox.boxes.write`). */
export async function networkRoutes(app: FastifyInstance, ctx: ServerContext): Promise<void> {
  for (const method of ['put', 'patch'] as const) {
    app[method]<{ Params: { box: string }; Body: { allow_net: string[] } }>(
      '/v1/boxes/:box/network',
      route(Permission.boxesWrite, {
        tags: ['boxes'],
        summary: `replace the network policy (allow_net) of a box${method === 'patch' ? ' (same as PUT)' : ''}`,
        description:
          'Applied to a running box at once, atomically: new connections follow the new rules, established connections to a destination no longer allowed are cut. Kept for the box’s later starts. A box whose network is disabled answers 409.',
        params: obj({ box: { type: 'string', description: 'box id (ULID) or name' } }, ['box']),
        body: obj({ allow_net: allowNetSchema }, ['allow_net']),
        response: {
          200: { description: 'the rules in force', ...obj({ allow_net: allowNetSchema }, ['allow_net']) },
        },
        errors: [409, 503],
      }),
      async (request) => {
        const box = await ctx.box(request.params.box, principalOf(request));
        const policy = await box.network.update({ allowNet: request.body.allow_net });
        return { allow_net: policy.allowNet };
      },
    );
  }
}
