/**
 * Several creature-server processes on one PostgreSQL database (a throwaway cluster of
 * `scripts/postgres.ts`): they start together on an empty database (migrated and seeded once), and a
 * change committed through either instance reaches the GraphQL subscribers (graphql-sse clients) of
 * both, exactly once and in the same order, while each instance's queries see it too.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { createClient } from 'graphql-sse';
import postgres from 'postgres';
import { type GraphQLBody, postgresDatabase, stopPostgres } from './helpers.ts';

after(stopPostgres);

const BIN = join(import.meta.dirname, '..', 'bin', 'creature-server.ts');

/** One creature-server process. */
interface Instance {
  /** `http://127.0.0.1:<port>`. */
  base: string;
  child: ChildProcess;
  /** POSTs a GraphQL operation; resolves with the parsed body. */
  gql(query: string, variables?: Record<string, unknown>): Promise<GraphQLBody>;
  /** SIGTERM, then waits for the exit. */
  stop(): Promise<void>;
}

/** Starts `bin/creature-server.ts` on a free port with `DATABASE_URL`; resolves once it listens. */
async function startInstance(databaseUrl: string): Promise<Instance> {
  const child = spawn(process.execPath, ['--conditions=seed-source', BIN], {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'listening' log in 30 s: ${stderr}`)), 30_000);
    child.once('exit', (code) => reject(new Error(`creature-server exited with ${code}: ${stderr}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const entry = JSON.parse(line) as { msg?: string; port?: number };
      if (entry.msg === 'listening' && entry.port) {
        clearTimeout(timer);
        resolve(entry.port);
      }
    });
  });
  const base = `http://127.0.0.1:${port}`;
  return {
    base,
    child,
    async gql(query, variables) {
      const res = await fetch(`${base}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json' },
        body: JSON.stringify({ query, variables }),
      });
      return (await res.json()) as GraphQLBody;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The number of open event streams an instance reports on `/metrics`. */
async function openStreams(instance: Instance): Promise<number> {
  const text = await (await fetch(`${instance.base}/metrics`)).text();
  return Number(/^creatures_event_streams_open (\d+)$/m.exec(text)?.[1] ?? Number.NaN);
}

interface Change {
  kind: string;
  id: string;
  name: string;
  creature: { maxHP: number | null } | null;
}

/** A subscriber on one instance: every `creatureChanged` event it receives, in order. */
function subscribe(instance: Instance) {
  const client = createClient({ url: `${instance.base}/graphql`, retryAttempts: 0 });
  const received: Change[] = [];
  const waiters: (() => void)[] = [];
  const iterator = client.iterate<{ creatureChanged: Change }>({
    query: 'subscription { creatureChanged { kind id name creature { maxHP } } }',
  });
  const done = (async () => {
    for await (const result of iterator) {
      received.push(result.data!.creatureChanged);
      for (const wake of waiters.splice(0)) wake();
    }
  })();
  return {
    received,
    /** Resolves once `n` events have arrived (fails the test after 30 s: a loaded machine is slow). */
    async until(n: number): Promise<Change[]> {
      const deadline = Date.now() + 30_000;
      while (received.length < n) {
        if (Date.now() > deadline) throw new Error(`${received.length} of ${n} events arrived`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 200);
        });
      }
      return received.slice(0, n);
    },
    async close() {
      await iterator.return?.();
      client.dispose();
      await done;
    },
  };
}

describe('two creature-server processes on one PostgreSQL database', () => {
  let url: string;
  let a: Instance;
  let b: Instance;
  before(async () => {
    url = await postgresDatabase();
    [a, b] = await Promise.all([startInstance(url), startInstance(url)]);
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  test('starting together on an empty database, they migrate and seed it once', async () => {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const [row] = await sql`SELECT count(*)::int AS count FROM creatures`;
      assert.equal(row?.count, 151);
      assert.deepEqual(
        (await sql`SELECT version FROM creature_migrations ORDER BY version`).map((r) => r.version),
        [1, 2],
      );
    } finally {
      await sql.end();
    }
    for (const instance of [a, b]) {
      const health = await (await fetch(`${instance.base}/healthz`)).json();
      assert.deepEqual(health, { status: 'ok', creatures: 151 });
    }
  });

  test('a change made on either instance reaches the subscribers of both, once, in the same order', async () => {
    const onA = subscribe(a);
    const onB = subscribe(b);
    try {
      for (const instance of [a, b]) {
        const deadline = Date.now() + 30_000;
        while ((await openStreams(instance)) !== 1) {
          assert.ok(Date.now() < deadline, 'the subscription did not open');
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }

      const created = await a.gql(
        'mutation { createCreature(input: { name: "Voltling", maxHP: 40 }) { id } }',
      );
      assert.deepEqual(created, { data: { createCreature: { id: '152' } } });
      const voltling = { kind: 'CREATED', id: '152', name: 'Voltling', creature: { maxHP: 40 } };
      assert.deepEqual(await onA.until(1), [voltling]);
      assert.deepEqual(await onB.until(1), [voltling]);
      // B's in-memory creatures have it too: by name, in the list, as an evolution target.
      const seen = await b.gql('{ creature(name: "voltling") { id } creatures { id } }');
      assert.equal(seen.data.creature.id, '152');
      assert.equal(seen.data.creatures.length, 152);

      const renamed = await b.gql(
        'mutation { updateCreature(id: "152", input: { name: "Voltlord", evolutionIds: ["025"] }) { name } }',
      );
      assert.deepEqual(renamed, { data: { updateCreature: { name: 'Voltlord' } } });
      const voltlord = { kind: 'UPDATED', id: '152', name: 'Voltlord', creature: { maxHP: 40 } };
      assert.deepEqual((await onA.until(2))[1], voltlord);
      assert.deepEqual((await onB.until(2))[1], voltlord);
      const onAnswer = await a.gql('{ creature(id: "152") { name evolutions { name } } }');
      assert.deepEqual(onAnswer.data.creature, { name: 'Voltlord', evolutions: [{ name: 'Pikachu' }] });
      // The unique-name rule holds across instances: A knows B's rename.
      const taken = await a.gql('mutation { createCreature(input: { name: "VOLTLORD" }) { id } }');
      assert.match(
        JSON.stringify(taken.errors),
        /input\.name must be unique: \\"VOLTLORD\\" is taken by creature 152/,
      );

      // 24 concurrent writes spread over both instances: creations get distinct ids, and both
      // subscribers see the same 24 events in the same order.
      const burst = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          (i % 2 === 0 ? a : b).gql(
            i % 3 === 0
              ? `mutation { createCreature(input: { name: "Burst ${i}" }) { id } }`
              : `mutation { updateCreature(id: "001", input: { maxHP: ${1000 + i} }) { id } }`,
          ),
        ),
      );
      assert.deepEqual(
        burst.filter((r) => r.errors),
        [],
      );
      const newIds = burst.flatMap((r) => (r.data.createCreature ? [r.data.createCreature.id] : []));
      assert.equal(new Set(newIds).size, 8);
      const fromA = (await onA.until(26)).slice(2);
      const fromB = (await onB.until(26)).slice(2);
      assert.deepEqual(fromA, fromB);
      assert.deepEqual(
        fromA
          .filter((c) => c.kind === 'CREATED')
          .map((c) => c.id)
          .sort(),
        [...newIds].sort(),
      );
      assert.deepEqual(
        fromA.flatMap((c) => (c.id === '001' ? [c.creature!.maxHP] : [])).sort(),
        Array.from({ length: 24 }, (_, i) => i)
          .filter((i) => i % 3 !== 0)
          .map((i) => 1000 + i),
      );

      // Nothing more arrives: the next event on each subscriber is this marker, not a duplicate.
      await b.gql('mutation { deleteCreature(id: "152") { id } }');
      const marker = { kind: 'DELETED', id: '152', name: 'Voltlord', creature: null };
      assert.deepEqual((await onA.until(27))[26], marker);
      assert.deepEqual((await onB.until(27))[26], marker);
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(onA.received.length, 27);
      assert.equal(onB.received.length, 27);
    } finally {
      await Promise.all([onA.close(), onB.close()]);
    }
  });
});
