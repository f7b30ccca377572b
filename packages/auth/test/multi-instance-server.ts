/**
 * One auth server instance for the multi-instance tests and the PostgreSQL bench, run as its own process
 * (`fork`): the configuration comes from the environment exactly as `auth-server` reads it
 * (`configFromEnv`: `AUTH_DATABASE_URL`, `AUTH_ISSUER`, `AUTH_PORT`, …), with cheap scrypt parameters so
 * that tests and benches measure the service, not 128 MiB password hashes.
 *
 * IPC: sends `{ type: 'listening', base }` once it listens; answers `{ type: 'rotate' }` (an immediate
 * signing-key rotation on this instance) with `{ type: 'rotated', kid }`, and `{ type: 'cpu' }` with
 * `{ type: 'cpu', user, system }` (µs of CPU used by this process). Stops on SIGTERM.
 */
import { configFromEnv } from '../src/env-config.ts';
import { buildAuthServer } from '../src/server.ts';

const { port, host, options } = configFromEnv();
const server = await buildAuthServer({
  ...options,
  hashParams: { ln: 10, r: 8, p: 1 },
  // The lockout test counts failures; the default 5 is the spec's.
  maxAccessFailedCount: 5,
});
const base = await server.listen(port, host);
process.send?.({ type: 'listening', base });

process.on('message', (message: { type?: string }) => {
  if (message?.type === 'rotate') {
    void server.keys.rotate({ immediate: true }).then(() => {
      process.send?.({ type: 'rotated', kid: server.keys.active().kid });
    });
  } else if (message?.type === 'cpu') {
    process.send?.({ type: 'cpu', ...process.cpuUsage() });
  }
});
process.once('SIGTERM', () => {
  void server.app.close().then(() => process.exit(0));
});
