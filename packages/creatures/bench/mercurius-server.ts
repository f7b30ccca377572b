/**
 * The benchmark peer: Fastify + Mercurius with graphql-jit (`jit: 1`, compile on first use) and its
 * query cache, serving the creature server's own executable schema over the same in-memory data.
 * Prints `{"port": N}` on stdout once listening; stops on SIGTERM.
 */
import Fastify from 'fastify';
import mercurius from 'mercurius';
import { SqliteStore, schema } from '../src/index.ts';

const store = new SqliteStore({ path: ':memory:' });
const app = Fastify({ logger: false });
await app.register(mercurius, { schema, context: () => ({ store }), jit: 1, graphiql: false });
await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const address = app.server.address();
console.log(JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 }));
process.on('SIGTERM', () => {
  app.close().then(() => process.exit(0));
});
