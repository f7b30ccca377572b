/**
 * Pulls images from the local registry into a runtime's image store ahead of the tests that use them, so
 * that a test's readiness budget (`ComputerBox.waitUntilReady`, `BrowserBox.start`) never includes a cold
 * pull and unpack. Prints one progress line per image (a progress bar on a terminal). Idempotent: an image
 * already in the store is not fetched again.
 *
 * Run: `node scripts/prepull.ts --home <dir> <reference>…` (exit 1 when a pull fails).
 */
import { parseArgs } from 'node:util';
import { renderPullProgress } from '../src/images/index.ts';
import { JsRuntime } from '../src/js-runtime.ts';

const { values, positionals } = parseArgs({ options: { home: { type: 'string' } }, allowPositionals: true });
if (!values.home || positionals.length === 0) {
  console.error('usage: node scripts/prepull.ts --home <dir> <reference>…');
  process.exit(2);
}
const runtime = new JsRuntime({
  homeDir: values.home,
  imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
});
for (const reference of positionals) {
  const started = performance.now();
  try {
    await runtime.images.pull(reference, { onProgress: renderPullProgress() });
  } catch (error) {
    console.error(`[sandbox setup] pulling ${reference} failed: ${(error as Error).message}`);
    process.exit(1);
  }
  console.error(
    `[sandbox setup] ${reference} is in ${values.home} (${((performance.now() - started) / 1000).toFixed(1)} s)`,
  );
}
runtime.close();
