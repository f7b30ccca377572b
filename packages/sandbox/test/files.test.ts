/**
 * The files suite (`files-suite.ts`) against both runtimes: the local `JsRuntime` and the REST
 * `JsRuntime` talking to a `RestServer` over the same homeDir.
 */
import { after } from 'node:test';
import { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { filesSuite } from './files-suite.ts';
import { cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';

let home: string | null = null;
let server: RestServer | null = null;

function sharedHome(): string {
  if (!home) {
    ensureRegistry();
    home = tempHome('sandbox-files-');
  }
  return home;
}

filesSuite('box.files on the local runtime', 'local', async () => ({
  kind: 'local',
  runtime: testRuntime(sharedHome()),
}));

filesSuite('box.files on the REST runtime', 'rest', async () => {
  server = await startRestServer({ runtime: testRuntime(sharedHome()), port: 0 });
  return { kind: 'rest', runtime: new JsRuntime({ url: server.url }) };
});

after(async () => {
  await server?.close();
  await cleanupAll();
});
