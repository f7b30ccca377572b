/**
 * A throwaway PostgreSQL cluster for tests and benches (Debian's `postgresql` package; no system cluster
 * is used or needed).
 *
 * {@link startPostgres} `initdb`s a cluster into a fresh temporary directory, starts `postgres` on
 * 127.0.0.1 at a free port (another one when that port is taken before the server binds it) and a unix
 * socket in the same directory (through which readiness is asked), creates a database and answers its
 * URL; `stop()` shuts the server down and removes the directory. `initdb` refuses to run as root, so when
 * this process is root the cluster belongs to the `postgres` system user (the server processes run as that
 * user; the directory is owned by it). {@link createDatabase} adds a database to a running cluster (one per
 * test file, for instance).
 *
 * As a command: `node scripts/postgres.ts install` installs the `postgresql` package with apt-get when its
 * binaries are missing and this process is root (idempotent, quiet when present) — the `test:setup` of the
 * packages that test against PostgreSQL call it.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Options of {@link startPostgres}. */
export interface StartPostgresOptions {
  /** Name of the database created at start (default `test`). */
  database?: string;
  /**
   * Server settings (`-c name=value`), on top of the test defaults: `fsync=off`, `full_page_writes=off`,
   * `synchronous_commit=off` (a crash of the throwaway cluster loses nothing anyone needs). Pass
   * `{ fsync: 'on', synchronous_commit: 'on', full_page_writes: 'on' }` for durable commits.
   */
  settings?: Record<string, string | number>;
  /** How long to wait for the server to accept connections, ms (default 30 000). */
  startTimeoutMs?: number;
}

/** A running throwaway cluster (see {@link startPostgres}). */
export interface PostgresCluster {
  /** `postgres://postgres@127.0.0.1:<port>/<database>` of the database created at start. */
  readonly url: string;
  /** TCP port on 127.0.0.1. */
  readonly port: number;
  /** Directory of the unix socket (`.s.PGSQL.<port>`). */
  readonly socketDir: string;
  /** Process id of the postmaster. */
  readonly pid: number;
  /**
   * Creates another database in this cluster and answers its URL; `name` defaults to a fresh
   * `db_<random>`. @throws Error when `createdb` fails (e.g. the name exists).
   */
  createDatabase(name?: string): Promise<string>;
  /** Stops the server (fast shutdown) and removes the cluster directory. Idempotent. */
  stop(): Promise<void>;
}

const DEFAULT_SETTINGS: Record<string, string | number> = {
  fsync: 'off',
  full_page_writes: 'off',
  synchronous_commit: 'off',
  max_connections: 200,
  shared_buffers: '64MB',
};

/**
 * The directory of the PostgreSQL server binaries: `$PG_BIN` when set, else the newest
 * `/usr/lib/postgresql/<major>/bin` holding `initdb`, or undefined when none is installed.
 */
export function postgresBinDir(): string | undefined {
  const fromEnv = process.env.PG_BIN;
  if (fromEnv) return existsSync(join(fromEnv, 'initdb')) ? fromEnv : undefined;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((name) => /^\d+$/.test(name) && existsSync(join(root, name, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? undefined : join(root, majors[0], 'bin');
}

/**
 * Makes sure the PostgreSQL server binaries are installed: nothing when {@link postgresBinDir} finds them;
 * otherwise, as root, `apt-get install -y postgresql` (running `apt-get update` once if the first attempt
 * fails). @returns the bin directory. @throws Error when they are missing and cannot be installed.
 */
export function ensurePostgresInstalled(): string {
  const present = postgresBinDir();
  if (present) return present;
  if (process.getuid?.() !== 0) {
    throw new Error('PostgreSQL is not installed; run as root: apt-get install -y postgresql');
  }
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const apt = (args: string[]) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env });
  const install = () => apt(['install', '-y', '-q', '--no-install-recommends', 'postgresql']).status === 0;
  if (!install() && (apt(['update', '-q']).status !== 0 || !install())) {
    throw new Error('apt-get install postgresql failed');
  }
  const bin = postgresBinDir();
  if (!bin) throw new Error('postgresql installed but no /usr/lib/postgresql/<major>/bin/initdb found');
  return bin;
}

/** The uid/gid the cluster runs as: the `postgres` user when this process is root, else this process's. */
function clusterOwner(): { uid: number; gid: number; home: string } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = spawnSync('getent', ['passwd', 'postgres'], { encoding: 'utf8' }).stdout.trim();
  const fields = line.split(':');
  if (fields.length < 7) {
    throw new Error('running as root needs the postgres system user (apt-get install -y postgresql)');
  }
  return { uid: Number(fields[2]), gid: Number(fields[3]), home: fields[5] ?? '/' };
}

/** Ports tried by `startPostgres` when the free port it chose is taken before the server binds it. */
const PORT_ATTEMPTS = 5;

/** The server's log line when its TCP port is taken (`postgres` exits then). */
const PORT_TAKEN = /could not bind|Address already in use|could not create any TCP\/IP sockets/;

/** A TCP port free on 127.0.0.1 at the time of the call. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

function randomName(): string {
  return `db_${Math.random().toString(36).slice(2, 12)}`;
}

/** Database names this helper creates: letters, digits and `_`, starting with a letter or `_`. */
function checkName(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(name)) {
    throw new RangeError(`database name: letters, digits and _ (at most 63), got '${name}'`);
  }
  return name;
}

const running = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Kills clusters left running when the process exits without calling `stop()` (e.g. a failed test). */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of running) child.kill('SIGQUIT');
  });
}

/**
 * Starts a throwaway cluster (see the module comment).
 * @throws Error when PostgreSQL is not installed, `initdb` fails, or the server does not accept
 * connections within `startTimeoutMs` (the error carries the server's log).
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresCluster> {
  const bin = postgresBinDir();
  if (!bin) {
    throw new Error(
      'PostgreSQL is not installed: run `npm run test:setup` as root (or apt-get install -y postgresql)',
    );
  }
  const database = checkName(options.database ?? 'test');
  const owner = clusterOwner();
  const dir = mkdtempSync(join(tmpdir(), 'seed-pg-'));
  const dataDir = join(dir, 'data');
  const asOwner = owner
    ? { uid: owner.uid, gid: owner.gid, env: { ...process.env, HOME: owner.home, LC_ALL: 'C.UTF-8' } }
    : { env: { ...process.env, LC_ALL: 'C.UTF-8' } };
  if (owner) chownSync(dir, owner.uid, owner.gid);
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  try {
    execFileSync(
      join(bin, 'initdb'),
      ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions'],
      { ...asOwner, cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
    );
  } catch (error) {
    cleanup();
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`initdb failed: ${stderr || String(error)}`, { cause: error });
  }
  const settings = { ...DEFAULT_SETTINGS, ...options.settings };
  /** Starts `postgres` on `port`; its log (stderr, first 64 kB) is read through `log()`. */
  const launch = (port: number) => {
    const args = ['-D', dataDir, '-p', String(port), '-h', '127.0.0.1', '-k', dir];
    for (const [name, value] of Object.entries(settings)) args.push('-c', `${name}=${value}`);
    const child = spawn(join(bin, 'postgres'), args, {
      ...asOwner,
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    running.add(child);
    let log = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      if (log.length < 64_000) log += chunk;
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.once('exit', () => running.delete(child));
    return { child, port, exited, log: () => log };
  };
  installExitHook();
  let server = launch(await freePort());
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    const { child, exited } = server;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGQUIT'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    cleanup();
  };
  const client = (tool: string, extra: string[]) =>
    execFileSync(
      join(bin, tool),
      ['-h', '127.0.0.1', '-p', String(server.port), '-U', 'postgres', ...extra],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, PGCONNECT_TIMEOUT: '5' },
      },
    );
  try {
    const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
    for (let attempt = 1; ; ) {
      const { child, port } = server;
      if (child.exitCode !== null || child.signalCode !== null) {
        // The free port was taken meanwhile (another test file's server, say): another port.
        if (attempt < PORT_ATTEMPTS && PORT_TAKEN.test(server.log())) {
          attempt++;
          server = launch(await freePort());
          continue;
        }
        throw new Error('postgres exited');
      }
      // Asked through this cluster's own unix socket: a server of another cluster that holds the TCP
      // port never answers for this one.
      const ready = spawnSync(join(bin, 'pg_isready'), ['-q', '-h', dir, '-p', String(port)]);
      if (ready.status === 0) break;
      if (Date.now() > deadline) throw new Error('postgres did not accept connections in time');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    client('createdb', [database]);
  } catch (error) {
    await stop();
    throw new Error(`starting PostgreSQL failed: ${(error as Error).message}\n${server.log()}`, {
      cause: error,
    });
  }
  const port = server.port;
  const pid = server.child.pid ?? -1;
  const urlOf = (name: string) => `postgres://postgres@127.0.0.1:${port}/${name}`;
  return {
    url: urlOf(database),
    port,
    socketDir: dir,
    pid,
    async createDatabase(name?: string) {
      const db = checkName(name ?? randomName());
      client('createdb', [db]);
      return urlOf(db);
    },
    stop,
  };
}

if (import.meta.main) {
  const command = process.argv[2];
  if (command === 'install') {
    try {
      ensurePostgresInstalled();
    } catch (error) {
      console.error(`postgres setup: ${(error as Error).message}`);
      process.exit(1);
    }
  } else {
    console.error('usage: node scripts/postgres.ts install');
    process.exit(2);
  }
}
