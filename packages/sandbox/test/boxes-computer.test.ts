/**
 * ComputerBox (spec 002): a real X desktop in a box (image `seed/desktop:latest` built from Debian by
 * scripts/images-desktop.ts, cached outside the repository; unpacked once into the shared store
 * `<cache>/test-home-desktop`). One box serves every test of this file; its GUI ports are picked when it
 * starts (port 0), so a port probed free here cannot be taken meanwhile by another test file.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect } from 'node:tls';
import { cacheDir } from '../scripts/offline-images.ts';
// internal: the PNG-size and cursor-position parsers are tested as units
import { parseCursorPosition, pngSize } from '../src/boxes/computer.ts';
import {
  BoxError,
  COMPUTERBOX_DISPLAY_HEIGHT,
  COMPUTERBOX_DISPLAY_WIDTH,
  ComputerBox,
  JsRuntime,
  ParseError,
  TimeoutError,
} from '../src/index.ts';
import { REGISTRIES } from './runtime-helpers.ts';

const packageDir = join(import.meta.dirname, '..');
let runtime: JsRuntime;
let box: ComputerBox;

before(async () => {
  execFileSync(
    process.execPath,
    [join(packageDir, 'scripts', 'registry.ts'), '--quiet', '--images', 'desktop'],
    {
      stdio: ['ignore', 'inherit', 'inherit'],
      timeout: 900_000,
    },
  );
  runtime = new JsRuntime({ homeDir: join(cacheDir(), 'test-home-desktop'), imageRegistries: REGISTRIES });
  box = new ComputerBox({ runtime, guiHttpPort: 0, guiHttpsPort: 0 });
  await box.waitUntilReady();
});

after(async () => {
  await box?.stop();
});

/** Two distinct TCP ports free on the host's loopback right now (the GUI ports default to 3000/3001). */
async function freePorts(): Promise<[number, number]> {
  const servers = [createServer(), createServer()];
  for (const server of servers) await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const ports = servers.map((server) => (server.address() as AddressInfo).port);
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
  return [ports[0]!, ports[1]!];
}

/** The box's publications of its GUI ports 3000 and 3001 as `[guestPort, hostIp, hostPort]`. */
async function guiPublications(of: ComputerBox): Promise<[number, string, number][]> {
  const published = (await of.getInfo()).network?.publishedPorts ?? [];
  return published
    .filter((p) => p.guestPort === 3000 || p.guestPort === 3001)
    .map((p): [number, string, number] => [p.guestPort, p.hostIp, p.hostPort])
    .sort((a, b) => a[0] - b[0]);
}

/** Runs a shell command in the box and returns its stdout (asserting success). */
async function sh(script: string): Promise<string> {
  const r = await box.exec('sh', '-c', script);
  assert.equal(r.exitCode, 0, r.stderr);
  return r.stdout;
}

/**
 * Polls `probe` until it returns a truthy value (the X server processes events asynchronously), for up to
 * 30 s (a loaded machine is slow).
 */
async function eventually<T>(probe: () => Promise<T | null | undefined | false>, what: string): Promise<T> {
  for (const end = Date.now() + 30_000; Date.now() < end; ) {
    const value = await probe();
    if (value) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`never happened: ${what}`);
}

describe('ComputerBox', () => {
  it('has the spec defaults: 2 CPUs, 2048 MiB, a 1024×768 display', async () => {
    const info = await box.getInfo();
    assert.equal(info.cpus, 2);
    assert.equal(info.memoryMib, 2048);
    assert.deepEqual(await box.getScreenSize(), [COMPUTERBOX_DISPLAY_WIDTH, COMPUTERBOX_DISPLAY_HEIGHT]);
  });

  it('types text and keys into an xterm; the shell in it receives them', async () => {
    await sh(
      'xterm -title typing-target -geometry 60x10+300+300 -e sh -c \'read -r line; printf %s "$line" > /tmp/typed\' >/dev/null 2>&1 &',
    );
    const id = (
      await eventually(async () => {
        const r = await box.exec('xdotool', 'search', '--name', 'typing-target');
        return r.exitCode === 0 ? r.stdout.trim().split('\n')[0] : null;
      }, 'the xterm window appears')
    ).trim();
    await sh(`xdotool windowactivate --sync ${id} || xdotool windowfocus --sync ${id}`);
    await box.type('to be erased');
    await box.key('ctrl+u'); // a chord: the terminal's line-kill character
    await box.type('Hello, box 42!');
    await box.key('BackSpace exclam Return');
    const typed = await eventually(async () => {
      const r = await box.exec('cat', '/tmp/typed');
      return r.exitCode === 0 ? r.stdout : null;
    }, 'the typed line reaches the shell');
    assert.equal(typed, 'Hello, box 42!');
  });

  it('moves, clicks and drags the pointer; cursorPosition reports where it is', async () => {
    // Everything happens over the desktop's own xterm (40,40 to ≈530,385): clicks on the bare root window
    // would open jwm's root menu, which grabs the pointer.
    await box.mouseMove(200, 150);
    assert.deepEqual(await box.cursorPosition(), [200, 150]);
    await box.leftClick();
    await box.rightClick();
    await box.middleClick();
    await box.doubleClick();
    await box.tripleClick();
    await box.leftClickDrag(100, 100, 400, 300);
    assert.deepEqual(await box.cursorPosition(), [400, 300]);
    await box.scroll(300, 250, 'down', 2);
    assert.deepEqual(await box.cursorPosition(), [300, 250]);
    await assert.rejects(box.mouseMove(-1, 5), { name: 'BoxError', field: 'x' });
    await assert.rejects(box.scroll(1, 1, 'sideways' as 'up'), { name: 'BoxError', field: 'direction' });
    await assert.rejects(box.key('ctrl+'), { name: 'BoxError', field: 'keySequence' });
    await assert.rejects(box.key('ctrl+NoSuchKeyName'), {
      name: 'BoxError',
      field: 'keySequence',
      message: /NoSuchKeyName/,
    });
  });

  it('screenshot is a base64 PNG of 1024×768 showing the desktop', async () => {
    const shot = await box.screenshot();
    assert.equal(shot.format, 'png');
    assert.equal(shot.width, 1024);
    assert.equal(shot.height, 768);
    const png = Buffer.from(shot.data, 'base64');
    assert.deepEqual(pngSize(png), [1024, 768]);
    assert.ok(png.length > 2000, 'a real picture, not an empty image');
    if (process.env.SEED_SANDBOX_SCREENSHOT) writeFileSync(process.env.SEED_SANDBOX_SCREENSHOT, png);
  });

  it('serves the desktop in a browser (noVNC) on the GUI ports of the host (HTTP and HTTPS)', async () => {
    const urls = await box.guiUrls();
    const http = /^http:\/\/127\.0\.0\.1:(\d+)\/vnc\.html$/.exec(urls.http);
    const https = /^https:\/\/127\.0\.0\.1:(\d+)\/vnc\.html$/.exec(urls.https);
    assert.ok(http && https, JSON.stringify(urls));
    const [httpPort, httpsPort] = [Number(http[1]), Number(https[1])];
    // The ports the runtime picked and published on the host's loopback when the box started.
    assert.deepEqual(await guiPublications(box), [
      [3000, '127.0.0.1', httpPort],
      [3001, '127.0.0.1', httpsPort],
    ]);
    const page = await eventually(async () => {
      const res = await fetch(urls.http).catch(() => null);
      return res?.ok ? res.text() : null;
    }, 'noVNC answers on the HTTP GUI port');
    assert.match(page, /<title>noVNC<\/title>/);
    // The HTTPS port speaks TLS with the box's self-signed certificate.
    const tls = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: httpsPort, rejectUnauthorized: false }, () => {
        resolve(socket.getPeerCertificate().subject?.CN as string);
        socket.end();
      });
      socket.on('error', reject);
    });
    assert.equal(tls, 'computerbox');
  });

  it('cursorPosition parse failures raise ParseError; bad PNG data too', () => {
    assert.deepEqual(parseCursorPosition('X=5\nY=7\nSCREEN=0\nWINDOW=1\n'), [5, 7]);
    assert.throws(() => parseCursorPosition('garbage'), ParseError);
    assert.throws(() => pngSize(Buffer.from('not a png at all, clearly not')), ParseError);
    assert.ok(new ParseError('x') instanceof BoxError);
  });

  it('waitUntilReady raises TimeoutError when the desktop is not ready in time; given GUI ports are published', async () => {
    // Ports probed free here can be taken by another process before the box binds them: the box then
    // fails to start with a BoxError naming the port (`ports[i].hostPort: cannot listen on …`), and other
    // ports are tried (up to 5 times).
    for (let attempt = 1; ; attempt++) {
      const [httpPort, httpsPort] = await freePorts();
      const other = new ComputerBox({ runtime, guiHttpPort: httpPort, guiHttpsPort: httpsPort });
      try {
        const error = await other.waitUntilReady(0.001).then(
          () => null,
          (e: unknown) => e,
        );
        const taken =
          error instanceof BoxError && /ports\[\d+\]\.hostPort: cannot listen/.test(error.message);
        if (taken && attempt < 5) continue;
        assert.ok(error instanceof TimeoutError, String(error));
        assert.deepEqual(await guiPublications(other), [
          [3000, '127.0.0.1', httpPort],
          [3001, '127.0.0.1', httpsPort],
        ]);
        return;
      } finally {
        await other.stop();
      }
    }
  });
});
