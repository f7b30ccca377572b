/**
 * `BrowserBox` (spec 002 "BrowserBox"): a box running a headless browser whose remote-debugging port
 * (9222 chromium) is reachable from the host at `endpoint()`, e.g. for Playwright's
 * `chromium.connectOverCDP(endpoint)` or Puppeteer's `connect({ browserURL })`.
 *
 * Chromium's DevTools server listens only on the box's loopback (recent Chromium ignores
 * `--remote-debugging-address`), so the box runs it on `BROWSERBOX_INTERNAL_PORT_OFFSET + port` and
 * `socat` relays the spec's port on every interface of the box to it. The spec's port is published to the
 * host's 127.0.0.1 through `ports` (local runtime); when no publication is active (network `disabled`, or
 * a runtime without port publication) a host listener on 127.0.0.1 relays each connection into the box's
 * network namespace (`browser-relay.ts`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BROWSERBOX_PORT_CHROMIUM, BROWSERBOX_PORT_FIREFOX, BROWSERBOX_PORT_WEBKIT } from '../constants.ts';
import { BoxError, TimeoutError } from '../errors.ts';
import type { JsExecution } from '../runtime/execution.ts';
import type { BrowserType, JsBoxOptions } from '../types.ts';
import { type HostPort, hostPortOf } from './browser-relay.ts';
import { SimpleBox, type SimpleBoxOptions } from './simple.ts';

/** Options of `BrowserBox`: those of `SimpleBox` plus `browser` (spec 002); 2 CPUs and 2048 MiB by default. */
export interface BrowserBoxOptions extends SimpleBoxOptions {
  /** `chromium` (default), `firefox` or `webkit`. Only chromium is available (see the README). */
  browser?: BrowserType;
}

/** Remote-debugging port of each browser type (spec 002). */
export const BROWSERBOX_PORTS: Readonly<Record<BrowserType, number>> = {
  chromium: BROWSERBOX_PORT_CHROMIUM,
  firefox: BROWSERBOX_PORT_FIREFOX,
  webkit: BROWSERBOX_PORT_WEBKIT,
};

/** The fixed image of each available browser type (built by `scripts/images-desktop.ts`). */
export const BROWSERBOX_IMAGES: Readonly<Partial<Record<BrowserType, string>>> = {
  chromium: 'seed/chromium:latest',
};

/** Default CPUs and memory (MiB) of a BrowserBox (spec 002). */
export const BROWSERBOX_CPUS = 2;
/** Default memory of a BrowserBox, MiB (spec 002). */
export const BROWSERBOX_MEMORY_MIB = 2048;
/** Default `start()` timeout, seconds. */
export const BROWSERBOX_START_TIMEOUT = 60;
/** Chromium itself listens on `port + offset` on the box's loopback; socat serves `port`. */
export const BROWSERBOX_INTERNAL_PORT_OFFSET = 10000;

const WHY_UNAVAILABLE: Record<Exclude<BrowserType, 'chromium'>, string> = {
  firefox:
    'no firefox image is built: Debian offers firefox-esr, whose remote debugging is WebDriver BiDi only ' +
    '(CDP was removed), and Playwright cannot drive a stock Firefox',
  webkit:
    'no webkit image is built: Debian has no WebKit browser with a remote-debugging protocol ' +
    '(only WebKitWebDriver, WebDriver classic; Playwright needs its own patched WebKit)',
};

/** A box running a browser with its remote-debugging port reachable from the host (spec 002 `BrowserBox`). */
export class BrowserBox extends SimpleBox {
  /** The browser type of this box. */
  readonly browser: BrowserType;
  readonly #port: number;
  #endpoint: string | null = null;
  #process: JsExecution | null = null;
  #hostPort: HostPort | null = null;
  #starting: Promise<void> | null = null;

  /**
   * @param options SimpleBox options plus `browser` (default `chromium`); nothing is created until `start()`.
   * @throws BoxError (field `browser`) for an unknown browser type, or for `firefox`/`webkit`, which have
   *   no usable remote-debugging build in Debian (see the README).
   */
  constructor(options: BrowserBoxOptions = {}) {
    const browser = options.browser ?? 'chromium';
    if (!Object.hasOwn(BROWSERBOX_PORTS, browser)) {
      throw new BoxError(
        `invalid box option browser: '${String(browser)}' is not one of chromium, firefox, webkit`,
        { field: 'browser' },
      );
    }
    const image = BROWSERBOX_IMAGES[browser];
    if (image === undefined) {
      throw new BoxError(
        `browser '${browser}' is not available: ${WHY_UNAVAILABLE[browser as 'firefox' | 'webkit']}`,
        { field: 'browser' },
      );
    }
    super(options, { image, cpus: BROWSERBOX_CPUS, memoryMib: BROWSERBOX_MEMORY_MIB });
    this.browser = browser;
    this.#port = BROWSERBOX_PORTS[browser];
  }

  /**
   * The box options, with the debugging port added to `ports`: on the host's 127.0.0.1 (the DevTools
   * protocol is unauthenticated remote control of the browser), host port chosen automatically.
   */
  protected override boxOptions(): JsBoxOptions {
    const options = super.boxOptions();
    const ports = options.ports ?? [];
    if (!ports.some((p) => p.guestPort === this.#port)) {
      options.ports = [...ports, { guestPort: this.#port, hostIp: '127.0.0.1' }];
    }
    return options;
  }

  /**
   * Starts the box if needed and the browser in it, and resolves once its debugging endpoint answers
   * from the host (`GET /json/version`). Calling it again after success is a no-op.
   * @param timeout seconds to wait for the browser (default 60).
   * @throws TimeoutError when the endpoint does not answer in time; BoxError when the browser exits during
   *   start (with the end of its stderr). After a failure the browser is killed and `start()` may be retried.
   */
  start(timeout: number = BROWSERBOX_START_TIMEOUT): Promise<void> {
    if (typeof timeout !== 'number' || !(timeout > 0)) {
      return Promise.reject(
        new BoxError('invalid start timeout: must be a positive number of seconds', { field: 'timeout' }),
      );
    }
    if (this.#endpoint) return Promise.resolve();
    this.#starting ??= this.#start(timeout)
      .catch(async (error: unknown) => {
        // Nothing half-started stays behind: the browser and the host access go; the box stays for stop().
        await this.#process?.kill().catch(() => {});
        this.#process = null;
        this.#hostPort?.close();
        this.#hostPort = null;
        throw error;
      })
      .finally(() => {
        this.#starting = null;
      });
    return this.#starting;
  }

  async #start(timeout: number): Promise<void> {
    const deadline = performance.now() + timeout * 1000;
    const box = await this.ensureStarted();
    const internal = this.#port + BROWSERBOX_INTERNAL_PORT_OFFSET;
    const script = [
      `socat TCP-LISTEN:${this.#port},fork,reuseaddr TCP:127.0.0.1:${internal} &`,
      'exec chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run',
      `--remote-debugging-port=${internal} --user-data-dir=/tmp/browserbox-profile about:blank`,
    ].join(' ');
    const execution = await box.execWith('sh', ['-c', script], { DBUS_SESSION_BUS_ADDRESS: 'disabled:' }, {});
    this.#process = execution;
    const { stderr, stdin } = execution.collect();
    await stdin.close();
    let stderrTail = '';
    void stderr.drainTo((text) => {
      stderrTail = (stderrTail + text).slice(-2000);
    });
    let exited: number | null = null;
    void execution.wait().then(({ exitCode }) => {
      exited = exitCode;
    });
    this.#hostPort?.close();
    this.#hostPort = await hostPortOf(box, this.#port);
    const { host, port } = this.#hostPort;
    const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    while (performance.now() < deadline) {
      if (exited !== null) {
        throw new BoxError(
          `${this.browser} exited with code ${exited} during start: ${stderrTail.trim().split('\n').slice(-5).join('\n')}`,
        );
      }
      if (await answers(`${base}/json/version`)) {
        this.#endpoint = base;
        return;
      }
      await sleep(100);
    }
    throw new TimeoutError(`${this.browser} did not answer at ${base} within ${timeout} s`);
  }

  /**
   * The debugging endpoint URL on the host, `http://<host>:<port>` (spec 002).
   * @throws BoxError before `start()` has resolved.
   */
  endpoint(): string {
    if (!this.#endpoint) throw new BoxError('the browser is not started; call start() first');
    return this.#endpoint;
  }

  /** Stops the browser's relay (if any) and the box (removed when `autoRemove`, the default). */
  override async stop(): Promise<void> {
    if (this.#starting) await this.#starting.catch(() => {});
    this.#endpoint = null;
    this.#hostPort?.close();
    this.#hostPort = null;
    await this.#process?.kill().catch(() => {});
    this.#process = null;
    await super.stop();
  }
}

/** True when `url` answers 200 within 2 s. */
async function answers(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}
