/**
 * Server process of `files-large.test.ts`: a REST server (as `sandbox serve` runs it) over a local
 * runtime on `homeDir`, in a process of its own so that the client and the server are measured apart.
 * Prints `listening <url>` once it accepts requests; exits on SIGTERM after closing the server.
 * Usage: node files-large-child.ts <homeDir>
 */
import { JsRuntime } from '../src/index.ts';
import { startRestServer } from '../src/rest/server.ts';
import { REGISTRIES } from './runtime-helpers.ts';

const [homeDir] = process.argv.slice(2) as [string];
const server = await startRestServer({
  runtime: new JsRuntime({ homeDir, imageRegistries: REGISTRIES }),
  port: 0,
});
console.log(`listening ${server.url}`);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
