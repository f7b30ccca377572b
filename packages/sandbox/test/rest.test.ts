/**
 * The shared runtime suite (`rest-suite.ts`) against both runtimes of spec 002: the local `JsRuntime`,
 * and the REST `JsRuntime` (`new JsRuntime({ url })`) talking to a `RestServer` over the same homeDir.
 */
import { after } from 'node:test';
import { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { runtimeSuite } from './rest-suite.ts';
import { cleanupAll, ensureRegistry, seededHome, testRuntime } from './runtime-helpers.ts';

let home: string | null = null;
let server: RestServer | null = null;

function sharedHome(): string {
  if (!home) {
    ensureRegistry();
    home = seededHome('sandbox-rest-');
  }
  return home;
}

runtimeSuite('local JsRuntime (shared suite)', 'local', async () => ({
  kind: 'local',
  runtime: testRuntime(sharedHome()),
}));

runtimeSuite('REST JsRuntime (shared suite)', 'rest', async () => {
  server = await startRestServer({ runtime: testRuntime(sharedHome()), port: 0 });
  const runtime = new JsRuntime({ url: server.url });
  return { kind: 'rest', runtime };
});

after(async () => {
  await server?.close();
  await cleanupAll();
});
