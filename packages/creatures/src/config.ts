/**
 * The server options that come from environment variables beyond the basic ones the `creature-server`
 * command reads itself (port, host, database, CORS, body limit, log level, response cache).
 */
import { loadAllowList } from './http/persisted.ts';
import type { CreatureServerOptions } from './server.ts';

function whole(env: NodeJS.ProcessEnv, name: string): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`${name} must be a whole number ≥ 0, got "${raw}"`);
  return value;
}

function flag(env: NodeJS.ProcessEnv, name: string): boolean | undefined {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return undefined;
  if (['on', 'true', '1', 'yes'].includes(raw)) return true;
  if (['off', 'false', '0', 'no'].includes(raw)) return false;
  throw new Error(`${name} must be on or off, got "${env[name]}"`);
}

/**
 * Reads `MAX_BATCH`, `PERSISTED_QUERIES`, `ALLOW_LIST_FILE`, `INTROSPECTION`, `EXPLORER`,
 * `SUGGESTIONS`, `METRICS` (on/off) and `GET_CACHE_MAX_AGE` (seconds) from `env`. Unset variables leave the
 * option out (the server's default applies). Throws an `Error` naming the variable for a bad value or
 * an unreadable manifest.
 */
export function serverOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): Partial<CreatureServerOptions> {
  const options: Partial<CreatureServerOptions> = {};
  const maxBatch = whole(env, 'MAX_BATCH');
  if (maxBatch !== undefined) options.maxBatch = maxBatch;
  const apq = flag(env, 'PERSISTED_QUERIES');
  if (apq !== undefined) options.automaticPersistedQueries = apq;
  for (const [name, key] of [
    ['INTROSPECTION', 'introspection'],
    ['EXPLORER', 'explorer'],
    ['SUGGESTIONS', 'suggestions'],
    ['METRICS', 'metrics'],
  ] as const) {
    const value = flag(env, name);
    if (value !== undefined) options[key] = value;
  }
  const maxAge = whole(env, 'GET_CACHE_MAX_AGE');
  if (maxAge !== undefined) options.getCacheMaxAge = maxAge;
  if (env.ALLOW_LIST_FILE) {
    try {
      options.allowList = loadAllowList(env.ALLOW_LIST_FILE);
    } catch (err) {
      throw new Error(`ALLOW_LIST_FILE: ${(err as Error).message}`);
    }
  }
  return options;
}
