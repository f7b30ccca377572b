#!/usr/bin/env node
/**
 * `creature-server`: runs the creature GraphQL server (spec 000) until SIGTERM/SIGINT, then shuts down
 * gracefully.
 *
 * Environment: `PORT` (default 4000), `HOST` (default 0.0.0.0), `DATABASE_PATH` (SQLite file, default
 * `packages/creatures/.data/creatures.db`; `:memory:` for a throwaway database), `CORS_ORIGINS`
 * (comma-separated origins or `*`; default none), `BODY_LIMIT` (bytes, default 102400), `LOG_LEVEL`
 * (pino level, default info), `RESPONSE_CACHE_SIZE` (responses of read-only queries kept, default 1000;
 * 0 turns the cache off), `NODE_ENV` (`development` shows unexpected error messages).
 */
import {
  type CreatureServer,
  createServer,
  DEFAULT_BODY_LIMIT,
  DEFAULT_DATABASE_PATH,
} from '../src/index.ts';

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

const cors = process.env.CORS_ORIGINS?.trim();
const databasePath = process.env.DATABASE_PATH || DEFAULT_DATABASE_PATH;
let server: CreatureServer;
try {
  server = createServer({
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
  });
} catch (err) {
  console.error(
    `creature-server: could not start with DATABASE_PATH=${databasePath}: ${(err as Error).message}`,
  );
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
  server.logger.fatal({ err }, 'could not start');
  await server.close();
  process.exit(1);
}
