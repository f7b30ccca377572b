/**
 * The REST runtime server as the package's main entry exposes it: its module (`server.ts`, with Fastify,
 * Ajv, `@fastify/swagger`, prom-client and jose) is loaded on the first call, so that a program importing
 * the SDK to run boxes — locally or as a REST client — does not carry the server's modules (≈ 20 MiB of
 * resident memory). The `RestServer` class itself is the `@seed/sandbox/server` entry.
 */
import type { RestServer, RestServerOptions } from './server.ts';

export type { RestServer, RestServerOptions } from './server.ts';

/**
 * Starts a REST runtime server (`sandbox serve` in code); resolves once it listens on `server.url`.
 * @throws Error as `new RestServer(options)` (empty `apiKey`, non-loopback host without a credential), or
 *   the listen error (address in use).
 */
export async function startRestServer(options: RestServerOptions): Promise<RestServer> {
  return (await import('./server.ts')).startRestServer(options);
}

/** The server's OpenAPI 3.1 document, generated from its route schemas, without starting a server. */
export async function openApiDocument(): Promise<Record<string, unknown>> {
  return (await import('./server.ts')).openApiDocument();
}
