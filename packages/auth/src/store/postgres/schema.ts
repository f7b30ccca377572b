/**
 * Versioned schema migrations of the PostgreSQL store, and how they are applied when several instances
 * start at once.
 *
 * The tables and columns are those of the SQLite store (`../migrations.ts`, whose row mappers both stores
 * share: `../rows.ts`), in PostgreSQL types: `bigint` milliseconds, `boolean` flags, `jsonb` lists and
 * documents, and `COLLATE "C"` on the keys lists are ordered by (byte order, as SQLite's). Applied
 * migrations are never edited — add a new one instead.
 */

import type postgres from 'postgres';
import { PG_ACCOUNT_TABLES } from '../account.ts';
import { PG_FACTOR_TABLES } from '../factors.ts';
import { PG_LINK_TABLES } from '../links.ts';
import { ADMINISTRATOR_ROLE_ID, ADMINISTRATOR_ROLE_NAME, type Migration } from '../migrations.ts';
import { PG_PASSKEY_TABLES } from '../passkeys.ts';

/**
 * Key of the advisory lock (`pg_advisory_xact_lock`) serializing migrations across instances: the first
 * instance applies a migration, the others wait and then find it recorded.
 */
export const MIGRATION_LOCK_KEY = 4_100_021;

/**
 * `LISTEN`/`NOTIFY` channel on which every change of a client row (or its metadata) is announced at commit,
 * by a trigger, whoever wrote it (payload: the client id).
 */
export const CLIENTS_CHANNEL = 'seed_auth_clients';

const NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

/** All PostgreSQL migrations, in order. */
export const PG_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'auth schema (users, roles, clients, audit, tokens, sessions, consent, OAuth extensions)',
    sql: `
CREATE TABLE users (
  id text PRIMARY KEY,
  user_name text NOT NULL,
  user_name_key text COLLATE "C" NOT NULL UNIQUE,
  password_hash text,
  is_enabled boolean NOT NULL DEFAULT true,
  lockout_end bigint,
  access_failed_count integer NOT NULL DEFAULT 0 CHECK (access_failed_count >= 0),
  security_stamp text NOT NULL,
  direct_permissions jsonb NOT NULL DEFAULT '[]',
  denied_permissions jsonb NOT NULL DEFAULT '[]',
  version integer NOT NULL DEFAULT 1,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  display_name text,
  given_name text,
  family_name text,
  email text,
  email_verified boolean NOT NULL DEFAULT false
);

CREATE TABLE roles (
  id text PRIMARY KEY,
  name text NOT NULL,
  name_key text COLLATE "C" NOT NULL UNIQUE,
  description text NOT NULL DEFAULT '',
  permissions jsonb NOT NULL DEFAULT '[]',
  denied_permissions jsonb NOT NULL DEFAULT '[]',
  is_system boolean NOT NULL DEFAULT false,
  version integer NOT NULL DEFAULT 1,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
);

CREATE TABLE user_roles (
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  role_id text NOT NULL REFERENCES roles(id) ON DELETE CASCADE,
  PRIMARY KEY (user_id, role_id)
);
CREATE INDEX user_roles_role ON user_roles(role_id);

CREATE TABLE role_parents (
  role_id text NOT NULL REFERENCES roles(id) ON DELETE CASCADE,
  parent_id text NOT NULL REFERENCES roles(id) ON DELETE CASCADE,
  PRIMARY KEY (role_id, parent_id),
  CHECK (role_id <> parent_id)
);
CREATE INDEX role_parents_parent ON role_parents(parent_id);

CREATE TABLE permissions (
  code text COLLATE "C" PRIMARY KEY,
  description text NOT NULL DEFAULT '',
  created_at bigint NOT NULL
);

CREATE TABLE clients (
  client_id text COLLATE "C" PRIMARY KEY,
  display_name text NOT NULL DEFAULT '',
  client_type text NOT NULL CHECK (client_type IN ('public', 'confidential')),
  secret_hash text,
  is_enabled boolean NOT NULL DEFAULT true,
  redirect_uris jsonb NOT NULL DEFAULT '[]',
  allowed_grant_types jsonb NOT NULL DEFAULT '[]',
  allowed_scopes jsonb NOT NULL DEFAULT '[]',
  permissions jsonb NOT NULL DEFAULT '[]',
  version integer NOT NULL DEFAULT 1,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  post_logout_redirect_uris jsonb NOT NULL DEFAULT '[]',
  backchannel_logout_uri text,
  require_consent boolean NOT NULL DEFAULT false,
  CHECK ((client_type = 'public') = (secret_hash IS NULL))
);

CREATE TABLE client_metadata (
  client_id text PRIMARY KEY REFERENCES clients(client_id) ON DELETE CASCADE,
  metadata jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE client_registrations (
  client_id text PRIMARY KEY REFERENCES clients(client_id) ON DELETE CASCADE,
  access_token_hash text NOT NULL,
  created_at bigint NOT NULL
);

CREATE TABLE audit_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  time bigint NOT NULL,
  category text NOT NULL,
  outcome text NOT NULL,
  subject_id text,
  subject_name text,
  client_id text,
  failure_code text,
  remote_address text,
  details jsonb
);
CREATE INDEX audit_events_time ON audit_events(time);
CREATE INDEX audit_events_subject ON audit_events(subject_id, time);
CREATE INDEX audit_events_category ON audit_events(category, time);

CREATE TABLE refresh_tokens (
  token_hash text PRIMARY KEY,
  family_id text NOT NULL,
  client_id text NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  user_id text REFERENCES users(id) ON DELETE CASCADE,
  scope text NOT NULL DEFAULT '',
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint,
  revoked_at bigint,
  replaced_by text,
  session_id text,
  auth_time bigint,
  dpop_jkt text
);
CREATE INDEX refresh_tokens_family ON refresh_tokens(family_id);
CREATE INDEX refresh_tokens_user ON refresh_tokens(user_id);
CREATE INDEX refresh_tokens_expires ON refresh_tokens(expires_at);
CREATE INDEX refresh_tokens_session ON refresh_tokens(session_id) WHERE session_id IS NOT NULL;

CREATE TABLE authorization_codes (
  code_hash text PRIMARY KEY,
  client_id text NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  redirect_uri text NOT NULL,
  scope text NOT NULL DEFAULT '',
  code_challenge text,
  code_challenge_method text CHECK (code_challenge_method IN ('S256', 'plain')),
  nonce text,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint,
  auth_time bigint,
  session_id text,
  amr jsonb
);
CREATE INDEX authorization_codes_expires ON authorization_codes(expires_at);

CREATE TABLE signing_keys (
  kid text PRIMARY KEY,
  alg text NOT NULL,
  private_jwk jsonb NOT NULL,
  public_jwk jsonb NOT NULL,
  created_at bigint NOT NULL,
  retired_at bigint,
  expires_at bigint
);

CREATE TABLE login_sessions (
  session_hash text PRIMARY KEY,
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  revoked_at bigint,
  sid text UNIQUE,
  amr jsonb NOT NULL DEFAULT '["pwd"]'
);
CREATE INDEX login_sessions_user ON login_sessions(user_id);

CREATE TABLE session_clients (
  session_id text NOT NULL,
  client_id text COLLATE "C" NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  created_at bigint NOT NULL,
  PRIMARY KEY (session_id, client_id)
);

CREATE TABLE consents (
  user_id text NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  client_id text COLLATE "C" NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  scopes jsonb NOT NULL DEFAULT '[]',
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL,
  PRIMARY KEY (user_id, client_id)
);
CREATE INDEX consents_client ON consents(client_id);

CREATE TABLE replay_cache (
  kind text NOT NULL,
  key text NOT NULL,
  expires_at bigint NOT NULL,
  PRIMARY KEY (kind, key)
);
CREATE INDEX replay_cache_expires ON replay_cache(expires_at);

CREATE TABLE pushed_authorization_requests (
  request_hash text PRIMARY KEY,
  client_id text NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  params jsonb NOT NULL,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL,
  used_at bigint
);
CREATE INDEX pushed_authorization_requests_expires ON pushed_authorization_requests(expires_at);

CREATE TABLE device_codes (
  device_code_hash text PRIMARY KEY,
  user_code text NOT NULL UNIQUE,
  client_id text NOT NULL REFERENCES clients(client_id) ON DELETE CASCADE,
  scope text NOT NULL DEFAULT '',
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'denied', 'used')),
  user_id text REFERENCES users(id) ON DELETE CASCADE,
  interval_s integer NOT NULL,
  last_polled_at bigint,
  created_at bigint NOT NULL,
  expires_at bigint NOT NULL
);
CREATE INDEX device_codes_expires ON device_codes(expires_at);

INSERT INTO roles (id, name, name_key, description, permissions, is_system, created_at, updated_at)
VALUES ('${ADMINISTRATOR_ROLE_ID}', '${ADMINISTRATOR_ROLE_NAME}', '${ADMINISTRATOR_ROLE_NAME}',
  'Built-in: full administration', '["auth.admin.**"]', true, ${NOW}, ${NOW});
`,
  },
  {
    version: 2,
    name: 'client change notifications',
    sql: `
CREATE FUNCTION seed_auth_notify_client() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    PERFORM pg_notify('${CLIENTS_CHANNEL}', OLD.client_id);
  ELSE
    PERFORM pg_notify('${CLIENTS_CHANNEL}', NEW.client_id);
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER clients_notify AFTER INSERT OR UPDATE OR DELETE ON clients
  FOR EACH ROW EXECUTE FUNCTION seed_auth_notify_client();
CREATE TRIGGER client_metadata_notify AFTER INSERT OR UPDATE OR DELETE ON client_metadata
  FOR EACH ROW EXECUTE FUNCTION seed_auth_notify_client();
`,
  },
  {
    version: 3,
    name: 'refresh-token families indexed by their usable tokens only',
    // See the SQLite migration of the same name: the family index holds the usable tokens alone.
    sql: `
DROP INDEX refresh_tokens_family;
CREATE INDEX refresh_tokens_family_usable ON refresh_tokens(family_id)
  WHERE used_at IS NULL AND revoked_at IS NULL;
`,
  },
  {
    version: 4,
    name: 'brute-force counters shared by instances',
    // The layout rate-limiter-flexible's PostgreSQL limiter reads and upserts: key (kind, scope and a
    // SHA-256 of the IP or account), points consumed in the window, window end (ms epoch).
    sql: `
CREATE TABLE rate_limits (
  key varchar(255) PRIMARY KEY,
  points integer NOT NULL DEFAULT 0,
  expire bigint
);
CREATE INDEX rate_limits_expire ON rate_limits(expire);
`,
  },
  {
    version: 5,
    name: 'second factors: TOTP factors, recovery codes, two-factor requirements',
    sql: PG_FACTOR_TABLES,
  },
  {
    version: 6,
    name: 'links of users to upstream OpenID provider accounts',
    sql: PG_LINK_TABLES,
  },
  {
    version: 7,
    name: 'passkeys (WebAuthn credentials)',
    sql: PG_PASSKEY_TABLES,
  },
  {
    version: 8,
    name: 'self-service link tokens',
    sql: PG_ACCOUNT_TABLES,
  },
  {
    version: 9,
    name: 'refresh tokens keep the authentication methods of their sign-in',
    // JSON array text (as in SQLite, so both stores bind the same insert values).
    sql: 'ALTER TABLE refresh_tokens ADD COLUMN amr text;',
  },
  {
    version: 10,
    name: 'users: telephone number and postal address (OpenID Connect phone and address claims)',
    sql: `
ALTER TABLE users ADD COLUMN phone_number text;
ALTER TABLE users ADD COLUMN phone_number_verified boolean NOT NULL DEFAULT false;
ALTER TABLE users ADD COLUMN address jsonb;
`,
  },
];

/**
 * Applies the pending migrations of `migrations`, each in its own transaction that first takes the
 * advisory lock {@link MIGRATION_LOCK_KEY} and then re-reads `schema_migrations`: instances starting at
 * the same time apply each migration exactly once (the others wait for the lock and skip it).
 * @returns the versions applied by this call.
 * @throws the database error of a failing migration (nothing of that migration is applied).
 */
export async function migrate(
  sql: postgres.Sql,
  now: () => number,
  migrations: readonly Migration[] = PG_MIGRATIONS,
): Promise<number[]> {
  const applied: number[] = [];
  for (const migration of migrations) {
    await sql.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`;
      await tx.unsafe(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`);
      const done = await tx`SELECT 1 FROM schema_migrations WHERE version = ${migration.version}`;
      if (done.length > 0) return;
      await tx.unsafe(migration.sql);
      await tx`INSERT INTO schema_migrations (version, name, applied_at)
        VALUES (${migration.version}, ${migration.name}, ${now()})`;
      applied.push(migration.version);
    });
  }
  return applied;
}
