/**
 * Several auth server processes on one database, for the multi-instance tests and the PostgreSQL bench:
 * {@link startInstance} forks `multi-instance-server.ts` with an environment (as `auth-server` reads it),
 * {@link startRoundRobinProxy} is a small HTTP proxy that sends each request to the next instance in turn
 * (what a load balancer in front of the instances does).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { Agent, createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';

const SERVER = new URL('./multi-instance-server.ts', import.meta.url).pathname;

/** A running instance. */
export interface Instance {
  /** Its own base URL, `http://127.0.0.1:<port>` (the issuer may be another URL: the proxy's). */
  readonly base: string;
  readonly child: ChildProcess;
  /** Rotates the signing key on this instance at once (`immediate`). @returns the new key's kid. */
  rotate(): Promise<string>;
  /** CPU time this process has used so far, µs. */
  cpu(): Promise<{ user: number; system: number }>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
}

function reply<T>(child: ChildProcess, type: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: { type?: string }) => {
      if (message?.type !== type) return;
      child.off('message', onMessage);
      child.off('exit', onExit);
      resolve(message as T);
    };
    const onExit = (code: number | null) => reject(new Error(`auth instance exited (${code})`));
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

/**
 * Forks one instance with `env` added to this process's environment (`AUTH_PORT` defaults to `0`,
 * `AUTH_HOST` to `127.0.0.1`). @throws Error when it exits before listening (its stderr is included).
 */
export async function startInstance(env: Record<string, string>): Promise<Instance> {
  const child = fork(SERVER, [], {
    env: { ...process.env, AUTH_PORT: '0', AUTH_HOST: '127.0.0.1', ...env },
    execArgv: ['--conditions=seed-source'],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    if (stderr.length < 20_000) stderr += chunk;
  });
  let listening: { base: string };
  try {
    listening = await reply<{ base: string }>(child, 'listening');
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${stderr}`);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    base: listening.base,
    child,
    async rotate() {
      const done = reply<{ kid: string }>(child, 'rotated');
      child.send({ type: 'rotate' });
      return (await done).kid;
    },
    async cpu() {
      const done = reply<{ user: number; system: number }>(child, 'cpu');
      child.send({ type: 'cpu' });
      const { user, system } = await done;
      return { user, system };
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
    },
  };
}

/** A running round-robin proxy. */
export interface RoundRobinProxy {
  /** `http://127.0.0.1:<port>`. */
  readonly base: string;
  /** The instances requests go to, in turn (set after they start: their issuer is this proxy). */
  targets: string[];
  /** How many requests each target received, by base URL. */
  readonly counts: Map<string, number>;
  stop(): Promise<void>;
}

/** Starts a proxy on 127.0.0.1 that forwards each request to the next of `targets` (keep-alive upstream). */
export async function startRoundRobinProxy(): Promise<RoundRobinProxy> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  let next = 0;
  const proxy: RoundRobinProxy = {
    base: '',
    targets: [],
    counts: new Map(),
    stop: async () => {},
  };
  const server = createServer((req, res) => {
    const target = proxy.targets[next++ % proxy.targets.length];
    if (!target) {
      res.writeHead(503).end();
      return;
    }
    proxy.counts.set(target, (proxy.counts.get(target) ?? 0) + 1);
    const url = new URL(req.url ?? '/', target);
    const upstream = request(url, { method: req.method, headers: req.headers, agent }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.end();
    });
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  Object.assign(proxy, {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  });
  return proxy;
}
