/** The snapshot suite (`snapshot-suite.ts`) against the local and the REST runtime. */
import { after } from 'node:test';
import { JsRuntime } from '../src/index.ts';
import { type RestServer, startRestServer } from '../src/rest/server.ts';
import { cleanupAll, ensureRegistry, tempHome, testRuntime } from './runtime-helpers.ts';
import { snapshotSuite } from './snapshot-suite.ts';

let home: string | null = null;
let server: RestServer | null = null;

function sharedHome(): string {
  if (!home) {
    ensureRegistry();
    home = tempHome('sandbox-snap-');
  }
  return home;
}

snapshotSuite('snapshots, clone, export and import on the local runtime', 'local', async () => ({
  kind: 'local',
  runtime: testRuntime(sharedHome()),
  // Another homeDir with no registry: the archive alone must be enough.
  importer: () => new JsRuntime({ homeDir: tempHome('sandbox-snap-import-') }),
}));

snapshotSuite('snapshots, clone, export and import on the REST runtime', 'rest', async () => {
  server = await startRestServer({ runtime: testRuntime(sharedHome()), port: 0 });
  const runtime = new JsRuntime({ url: server.url });
  return { kind: 'rest', runtime, importer: () => runtime };
});

after(async () => {
  await server?.close();
  await cleanupAll();
});
