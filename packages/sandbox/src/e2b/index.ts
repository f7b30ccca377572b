/**
 * `sandbox serve` as a drop-in E2B server: the control plane at the server's root
 * (`control-routes.ts`) and the in-sandbox daemon envd (`router.ts`, `envd-*.ts`) over the same boxes as
 * `/v1`. Unmodified `e2b` clients reach it with `E2B_API_URL=<server>` and `E2B_SANDBOX_URL=<server>`
 * (or Host names `<port>-<sandboxId>.<domain>` with `--e2b-domain`); see README "Coming from E2B".
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { Authenticator } from '../rest/auth.ts';
import type { ServerContext } from '../rest/context.ts';
import { controlRoutes } from './control-routes.ts';
import { OwnerNames } from './envd-filesystem.ts';
import { sendError } from './envd-http.ts';
import { ProcessTable } from './envd-process.ts';
import { E2bRouter, type SandboxTarget } from './router.ts';
import { E2bSandboxes } from './sandboxes.ts';
import { E2bSnapshots } from './snapshots.ts';

export { DEFAULT_TEMPLATES, ENVD_VERSION } from './sandboxes.ts';

/** E2B options of `RestServerOptions`. */
export interface E2bOptions {
  /** Template name → image, on top of `base` and `code-interpreter-v1` (`--template name=image`). */
  templates?: Record<string, string>;
  /** Domain of Host-based routing `<port>-<sandboxId>.<domain>` (`--e2b-domain`), also answered as each sandbox's `domain`. */
  domain?: string;
}

/** What `installE2b` gives the server for the traffic Fastify does not route. */
export interface E2bHandle {
  /**
   * Takes an upgrade request (the HTTP server's `upgrade` event) routed to a sandbox port and relays it
   * there; false, touching nothing, when the request is not for a sandbox. See `E2bRouter.upgrade`.
   */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
}

/**
 * Installs the E2B server on a REST server's Fastify instance: an `onRequest` hook that takes in-sandbox
 * requests (routing headers, Host names, signed `/files` URLs) before the server's own routes and auth,
 * and the control-plane routes. Call before the server's other hooks; pass upgrades to the returned
 * handle's `upgrade` first.
 * @throws Error when `options.templates` maps a name to an empty image.
 */
export function installE2b(
  app: FastifyInstance,
  ctx: ServerContext,
  auth: Authenticator,
  options: E2bOptions = {},
): E2bHandle {
  for (const [name, image] of Object.entries(options.templates ?? {})) {
    if (!name || !image) throw new Error(`template '${name}=${image}': give name=image`);
  }
  const sandboxes = new E2bSandboxes(ctx, options.templates);
  const snapshots = new E2bSnapshots(ctx, sandboxes);
  const domain = options.domain ?? null;
  const router = new E2bRouter(sandboxes, domain, new ProcessTable(), new OwnerNames());
  app.addHook('onRequest', async (request, reply) => {
    let target: SandboxTarget | null = null;
    let malformed: unknown = null;
    try {
      target = router.targetOf(request.raw);
    } catch (error) {
      malformed = error;
    }
    if (!malformed && !target && !router.isSignedFiles(request.raw)) return;
    reply.hijack();
    if (malformed) sendError(reply.raw, malformed);
    else void router.handle(request.raw, reply.raw, target);
  });
  app.register(controlRoutes, { auth, sandboxes, snapshots, domain });
  return { upgrade: (req, socket, head) => router.upgrade(req, socket, head) };
}
