#!/usr/bin/env node
/**
 * `creature-server`: runs the creature GraphQL server (spec 000) until SIGTERM/SIGINT, then shuts down
 * gracefully.
 *
 * Options: `--help` prints the usage and the environment variables, `--version` the package version;
 * anything else is a usage error (exit 2).
 *
 * Environment: `PORT` (default 4000), `HOST` (default 0.0.0.0), `DATABASE_URL` (`postgres://…`: the
 * PostgreSQL store, which several instances can share; takes precedence over `DATABASE_PATH`),
 * `DATABASE_PATH` (SQLite file, default `./.data/creatures.db` under the working directory; `:memory:`
 * for a throwaway database), `CORS_ORIGINS`
 * (comma-separated origins or `*`; default none), `BODY_LIMIT` (bytes, default 102400), `LOG_LEVEL`
 * (pino level, default info), `RESPONSE_CACHE_SIZE` (responses of read-only queries kept, default 1000;
 * 0 turns the cache off), `NODE_ENV` (`development` shows unexpected error messages).
 */
import { parseArgs } from 'node:util';
import pkg from '@seed/creatures/package.json' with { type: 'json' };
import type { CreatureServer } from '../src/index.ts';

const USAGE = `Usage: creature-server [--help] [--version]

Serves the creature GraphQL API at /graphql (explorer on a browser visit) and the web
front end at /. Configuration comes from the environment:
  PORT (default 4000), HOST (default 0.0.0.0),
  DATABASE_URL (postgres://user:password@host:5432/db: PostgreSQL, shareable by instances),
  DATABASE_PATH (default ./.data/creatures.db; :memory: for a throwaway database),
  CORS_ORIGINS (comma-separated origins or *), BODY_LIMIT (bytes, default 102400),
  LOG_LEVEL (default info), RESPONSE_CACHE_SIZE (default 1000; 0 turns it off), NODE_ENV.
`;
const MORE_ENV =
  'See the README of @seed/creatures for MAX_BATCH, PERSISTED_QUERIES, ALLOW_LIST_FILE and more.\n';

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    console.error(`${name} must be a whole number ≥ 0, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

/** Starts the server from the environment; stops it gracefully on SIGTERM/SIGINT. */
async function serve(): Promise<void> {
  const { createServer, DEFAULT_BODY_LIMIT, DEFAULT_DATABASE_PATH, redactUrl, serverOptionsFromEnv } =
    await import('../src/index.ts');
  const cors = process.env.CORS_ORIGINS?.trim();
  const databaseUrl = process.env.DATABASE_URL || undefined;
  const databasePath = process.env.DATABASE_PATH || DEFAULT_DATABASE_PATH;
  const database = databaseUrl ? `DATABASE_URL=${redactUrl(databaseUrl)}` : `DATABASE_PATH=${databasePath}`;
  let server: CreatureServer;
  try {
    server = createServer({
      databaseUrl,
      databasePath,
      bodyLimit: intFromEnv('BODY_LIMIT', DEFAULT_BODY_LIMIT),
      corsOrigins:
        cors === '*'
          ? '*'
          : (cors
              ?.split(',')
              .map((s) => s.trim())
              .filter(Boolean) ?? []),
      logLevel: process.env.LOG_LEVEL || 'info',
      responseCacheSize: intFromEnv('RESPONSE_CACHE_SIZE', 1000),
      ...serverOptionsFromEnv(process.env),
    });
  } catch (err) {
    console.error(`creature-server: could not start with ${database}: ${(err as Error).message}`);
    process.exit(1);
  }

  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      server.logger.info({ signal }, 'signal received');
      server.close().then(() => process.exit(0));
    });
  }

  try {
    await server.listen(intFromEnv('PORT', 4000), process.env.HOST || '0.0.0.0');
  } catch (err) {
    server.logger.fatal({ err, database }, 'could not start');
    await server.close();
    process.exit(1);
  }
}

/**
 * Runs the `creature-server` command with `argv` (the arguments after the script name): prints the
 * usage or the version, or starts the server. Exits with 2 on unknown options.
 */
export async function runCli(argv: string[] = process.argv.slice(2)): Promise<void> {
  let values: { help?: boolean; version?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: { help: { type: 'boolean', short: 'h' }, version: { type: 'boolean', short: 'v' } },
    }));
  } catch (error) {
    process.stderr.write(`creature-server: ${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
  if (values.help) process.stdout.write(USAGE + MORE_ENV);
  else if (values.version) process.stdout.write(`${pkg.version}\n`);
  else await serve();
}

if (import.meta.main) await runCli();
