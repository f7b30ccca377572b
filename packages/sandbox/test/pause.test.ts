/** The pause suite (`pause-suite.ts`) against the local and the REST runtime. */
import { after } from 'node:test';
import { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { pauseSuite } from './pause-suite.ts';
import { cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

let home: string | null = null;
let server: RestServer | null = null;

function sharedHome(): string {
  if (!home) {
    ensureRegistry();
    home = tempHome('sandbox-pause-');
  }
  return home;
}

pauseSuite('pause and resume on the local runtime', 'local', async () => ({
  kind: 'local',
  runtime: testRuntime(sharedHome()),
  homeDir: sharedHome(),
}));

pauseSuite('pause and resume on the REST runtime', 'rest', async () => {
  server = await startRestServer({ runtime: testRuntime(sharedHome()), port: 0 });
  return { kind: 'rest', runtime: new JsRuntime({ url: server.url }), homeDir: sharedHome() };
});

after(async () => {
  await server?.close();
  await cleanupAll();
});
