/**
 * BrowserBox with firefox (spec 002): Debian's firefox-esr in a box, driven from the host over WebDriver
 * BiDi (`ws://<endpoint>/session`, W3C WebDriver BiDi) with a plain WebSocket client, loading a page
 * served by this test process on the host (through a Unix socket bind-mounted into the box).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import WebSocket from 'ws';
import { BROWSERBOX_PORT_FIREFOX, BrowserBox, type JsRuntime } from '../src/index.ts';
import { type BrowserSetup, browserSetup } from './helpers/browser.ts';

let runtime: JsRuntime;
let shared = '';
let setup: BrowserSetup | undefined;

before(async () => {
  setup = await browserSetup(
    'firefox',
    '/tmp/sandbox-firefox-',
    (url) => `<!doctype html><title>Firefox at ${url}</title>`,
  );
  ({ runtime, shared } = setup);
});

after(() => setup?.close());

/** A minimal WebDriver BiDi client: numbered commands, answers matched by id. */
class Bidi {
  readonly #ws: WebSocket;
  #next = 0;
  readonly #pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  constructor(ws: WebSocket) {
    this.#ws = ws;
    ws.on('message', (data) => {
      const msg = JSON.parse(data.toString()) as {
        id?: number;
        type: string;
        result?: unknown;
        message?: string;
      };
      if (msg.id === undefined) return;
      const p = this.#pending.get(msg.id);
      this.#pending.delete(msg.id);
      if (msg.type === 'success') p?.resolve(msg.result);
      else p?.reject(new Error(`BiDi error: ${msg.message ?? JSON.stringify(msg)}`));
    });
  }
  static async connect(url: string): Promise<Bidi> {
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    });
    return new Bidi(ws);
  }
  send<T>(method: string, params: object): Promise<T> {
    const id = ++this.#next;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.#ws.send(JSON.stringify({ id, method, params }));
    });
  }
  close(): void {
    this.#ws.close();
  }
}

describe('BrowserBox (firefox)', () => {
  it('firefox: a WebDriver BiDi session at endpoint() navigates to a host page and reads its title', async () => {
    const box = new BrowserBox({
      runtime,
      browser: 'firefox',
      volumes: [{ hostPath: shared, guestPath: '/host', readOnly: true }],
    });
    try {
      await box.start();
      const endpoint = box.endpoint();
      assert.equal(endpoint, 'http://127.0.0.1:9223');
      // The box has network (the default): the endpoint is the runtime's port publication.
      const published = (await box.getInfo()).network?.publishedPorts ?? [];
      assert.deepEqual(
        published.map((p) => [p.guestPort, p.hostIp, p.hostPort]),
        [[9223, '127.0.0.1', 9223]],
      );
      const relay = await box.exec('sh', [
        '-c',
        'socat TCP-LISTEN:8080,fork,reuseaddr,bind=127.0.0.1 UNIX-CONNECT:/host/http.sock >/dev/null 2>&1 &',
      ]);
      assert.equal(relay.exitCode, 0);
      const bidi = await Bidi.connect(`${endpoint.replace(/^http/, 'ws')}/session`);
      try {
        const session = await bidi.send<{ capabilities: { browserName: string } }>('session.new', {
          capabilities: {},
        });
        assert.equal(session.capabilities.browserName, 'firefox');
        const tree = await bidi.send<{ contexts: { context: string }[] }>('browsingContext.getTree', {});
        const context = tree.contexts[0]!.context;
        await bidi.send('browsingContext.navigate', {
          context,
          url: 'http://127.0.0.1:8080/bidi-page',
          wait: 'complete',
        });
        const title = await bidi.send<{ result: { value: string } }>('script.evaluate', {
          expression: 'document.title',
          target: { context },
          awaitPromise: false,
        });
        assert.equal(title.result.value, 'Firefox at /bidi-page');
        await bidi.send('session.end', {});
      } finally {
        bidi.close();
      }
    } finally {
      await box.stop();
    }
    assert.equal(BROWSERBOX_PORT_FIREFOX, 9223);
  });
});
