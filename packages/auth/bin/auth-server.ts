#!/usr/bin/env node
/**
 * `auth-server`: starts the authorization and token service of spec 001 (configuration from the
 * environment, see `configFromEnv` in `src/server.ts` and the package README). On the first start with
 * an empty store it prints the generated administrator password and demo client secret once.
 */
import { buildAuthServer, configFromEnv } from '../src/server.ts';

const { port, host, options } = configFromEnv();
const server = await buildAuthServer({ ...options, logger: process.env.AUTH_LOG === '1' });
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
