/** The lifecycle suite (`lifecycle-suite.ts`) against the local and the REST runtime. */
import { after } from 'node:test';
import { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { boxProcessSuite } from './box-process-suite.ts';
import { lifecycleSuite } from './lifecycle-suite.ts';
import { cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

let home: string | null = null;
let server: RestServer | null = null;

function sharedHome(): string {
  if (!home) {
    ensureRegistry();
    home = tempHome('sandbox-lifecycle-');
  }
  return home;
}

lifecycleSuite('lifecycle on the local runtime', 'local', async () => ({
  kind: 'local',
  runtime: testRuntime(sharedHome()),
}));

lifecycleSuite('lifecycle on the REST runtime', 'rest', async () => {
  server ??= await startRestServer({ runtime: testRuntime(sharedHome()), port: 0 });
  return { kind: 'rest', runtime: new JsRuntime({ url: server.url }) };
});

boxProcessSuite('entrypoint, cmd, user and healthCheck on the local runtime', 'local', async () => ({
  runtime: testRuntime(sharedHome()),
  // Another instance on the same homeDir: it reads what the first one recorded.
  reader: testRuntime(sharedHome()),
}));

boxProcessSuite('entrypoint, cmd, user and healthCheck on the REST runtime', 'rest', async () => {
  server ??= await startRestServer({ runtime: testRuntime(sharedHome()), port: 0 });
  return { runtime: new JsRuntime({ url: server.url }), reader: new JsRuntime({ url: server.url }) };
});

after(async () => {
  await server?.close();
  await cleanupAll();
});
