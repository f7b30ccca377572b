#!/usr/bin/env node
/**
 * `auth-server`: starts the authorization and token service of spec 001 (configuration from the
 * environment, see `configFromEnv` in `src/server.ts` and the package README). On the first start with
 * an empty store it prints the generated administrator password and demo client secret once.
 *
 * Options: `--help` prints the usage and the environment variables, `--version` the package version;
 * anything else is a usage error (exit 2).
 */
import { parseArgs } from 'node:util';
import pkg from '@seed/auth/package.json' with { type: 'json' };

const USAGE = `Usage: auth-server [--help] [--version]

Starts the authorization and token service (OAuth 2.0 / OpenID Connect, login page,
administration API under /auth-admin). Configuration comes from the environment:
  AUTH_PORT (default 4100), AUTH_HOST (default 0.0.0.0), AUTH_ISSUER,
  AUTH_DATABASE_URL (postgres://…: PostgreSQL, several instances may share it),
  AUTH_DATABASE_PATH (SQLite file when no URL; default ./.data/auth.sqlite), AUTH_ADMIN_USERNAME,
  AUTH_ADMIN_PASSWORD, AUTH_DEMO_CLIENT_SECRET, AUTH_SIGNING_ALG,
  AUTH_ACCESS_TOKEN_TTL, AUTH_REFRESH_TOKEN_TTL (seconds), AUTH_LOG=1 (request log),
  AUTH_METRICS=0 (no Prometheus metrics at /metrics).
See the package README for every variable.
`;

/** Starts the server; resolves once it listens. Stops it on SIGINT/SIGTERM. */
async function serve(): Promise<void> {
  const { buildAuthServer } = await import('../src/server.ts');
  const { configFromEnv } = await import('../src/env-config.ts');
  const { port, host, options } = configFromEnv();
  const server = await buildAuthServer({
    ...options,
    logger: process.env.AUTH_LOG === '1',
    metrics: process.env.AUTH_METRICS !== '0',
  });
  const base = await server.listen(port, host);
  const { admin, clients, generatedDemoClientSecret } = server.bootstrap;
  if (admin) {
    console.log(`auth: created administrator '${admin.user.userName}'`);
    if (admin.generatedPassword)
      console.log(`auth: generated administrator password (shown once): ${admin.generatedPassword}`);
  }
  if (clients.length > 0) console.log(`auth: created clients ${clients.map((c) => c.clientId).join(', ')}`);
  if (generatedDemoClientSecret)
    console.log(`auth: generated demo-service client secret (shown once): ${generatedDemoClientSecret}`);
  console.log(`auth: listening on ${base} (issuer ${server.config.issuer})`);

  const stop = async () => {
    await server.app.close();
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

/**
 * Runs the `auth-server` command with `argv` (the arguments after the script name). Prints the usage or
 * the version, or starts the server. Exits with 2 on unknown options.
 */
export async function runCli(argv: string[] = process.argv.slice(2)): Promise<void> {
  let values: { help?: boolean; version?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
    }));
  } catch (error) {
    process.stderr.write(`auth-server: ${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
  if (values.help) process.stdout.write(USAGE);
  else if (values.version) process.stdout.write(`${pkg.version}\n`);
  else await serve();
}

if (import.meta.main) await runCli();
