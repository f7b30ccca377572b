/**
 * Test helper shared by the BrowserBox test files: makes sure the browser image is in the local offline
 * registry (`scripts/registry.ts`, built once and cached outside the repository), opens a runtime over
 * the shared desktop store (`<cache>/test-home-desktop`), and serves a page from this test process on the
 * host through a Unix socket (`http.sock`) in a fresh directory meant to be bind-mounted into the box
 * (box networking may be off, so the box reaches the host only through that socket).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { cacheDir } from '../../scripts/offline-images.ts';
import { JsRuntime } from '../../src/index.ts';
import { REGISTRIES } from '../runtime-helpers.ts';

/** What a browser test file uses: its runtime, the host directory holding `http.sock`, and cleanup. */
export interface BrowserSetup {
  runtime: JsRuntime;
  /** Host directory (made with `mkdtemp`) whose `http.sock` serves the page. */
  shared: string;
  /** Stops the page server and removes `shared`. */
  close(): void;
}

/**
 * Prepares `image` (`chromium` or `firefox`) in the local registry (up to 15 minutes on a cold cache),
 * then serves `page(url)` as `text/html; charset=utf-8` on `<shared>/http.sock`, `shared` being a fresh
 * `mkdtemp(tmpPrefix)`. @throws when the image cannot be prepared or the socket cannot listen.
 */
export async function browserSetup(
  image: 'chromium' | 'firefox',
  tmpPrefix: string,
  page: (url: string | undefined) => string,
): Promise<BrowserSetup> {
  const packageDir = join(import.meta.dirname, '..', '..');
  execFileSync(process.execPath, [join(packageDir, 'scripts', 'registry.ts'), '--quiet', '--images', image], {
    stdio: ['ignore', 'inherit', 'inherit'],
    timeout: 900_000,
  });
  const runtime = new JsRuntime({
    homeDir: join(cacheDir(), 'test-home-desktop'),
    imageRegistries: REGISTRIES,
  });
  const shared = mkdtempSync(tmpPrefix);
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(page(req.url));
  });
  await new Promise<void>((resolve) => server.listen(join(shared, 'http.sock'), resolve));
  return {
    runtime,
    shared,
    close() {
      server.close();
      rmSync(shared, { recursive: true, force: true });
    },
  };
}
