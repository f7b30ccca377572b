/**
 * `BrowserBox` (spec 002 "BrowserBox"): a box running a headless browser whose remote-debugging port
 * is reachable from the host at `endpoint()`: chromium (9222, CDP: Playwright's
 * `chromium.connectOverCDP(endpoint)`, Puppeteer's `connect({ browserURL })`) or firefox (9223, WebDriver
 * BiDi at `ws://…/session`: Puppeteer's `connect({ browserWSEndpoint, protocol: 'webDriverBiDi' })`).
 *
 * The browsers' debugging servers listen only on the box's loopback (recent Chromium ignores
 * `--remote-debugging-address`), so the box runs them on `BROWSERBOX_INTERNAL_PORT_OFFSET + port` and
 * `socat` relays the spec's port on every interface of the box to it. The spec's port is published to the
 * host's 127.0.0.1 through `ports` (local runtime); when no publication is active (network `disabled`, or
 * a runtime without port publication) a host listener on 127.0.0.1 relays each connection into the box's
 * network namespace (`browser-relay.ts`).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BROWSERBOX_PORT_CHROMIUM, BROWSERBOX_PORT_FIREFOX, BROWSERBOX_PORT_WEBKIT } from '../constants.ts';
import { BoxError, TimeoutError } from '../errors.ts';
import { GUEST_IP } from '../network/netns.ts';
import type { JsExecution } from '../runtime/execution.ts';
import type { BrowserType, JsBoxOptions } from '../types.ts';
import { type HostPort, hostPortOf } from './browser-relay.ts';
import { SimpleBox, type SimpleBoxOptions } from './simple.ts';

/** Options of `BrowserBox`: those of `SimpleBox` plus `browser` (spec 002); 2 CPUs and 2048 MiB by default. */
export interface BrowserBoxOptions extends SimpleBoxOptions {
  /** `chromium` (default, CDP), `firefox` (WebDriver BiDi) or `webkit` (not available, see the README). */
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
  firefox: 'seed/firefox:latest',
};

/**
 * Shell command line starting each browser headless with remote debugging on `port` (box loopback).
 * Chromium serves CDP (`/json/version`, `webSocketDebuggerUrl`); Firefox serves WebDriver BiDi at
 * `ws://…/session` (its CDP support was removed in Firefox 129).
 */
const LAUNCH: Readonly<Partial<Record<BrowserType, (port: number) => string>>> = {
  chromium: (port) =>
    'exec chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run ' +
    `--remote-debugging-port=${port} --user-data-dir=/tmp/browserbox-profile about:blank`,
  firefox: (port) =>
    'mkdir -p /tmp/browserbox-profile && exec firefox-esr --headless --no-remote ' +
    `--profile /tmp/browserbox-profile --remote-debugging-port=${port} ` +
    '--remote-allow-hosts localhost,127.0.0.1 about:blank',
};

/**
 * Firefox's BiDi server rejects a `Host` header whose port is not its own (DNS-rebinding protection), so
 * a firefox box listens on the spec's port itself and is reachable on the host at that same port
 * (one firefox box per host at a time); chromium accepts any IP `Host` and uses an internal port.
 */
const SAME_PORT_ON_HOST: Readonly<Partial<Record<BrowserType, boolean>>> = { firefox: true };

/** Path answered by the debugging server once it is up (any HTTP status counts for Firefox). */
const READY_PATH: Readonly<Record<BrowserType, string>> = {
  chromium: '/json/version',
  firefox: '/',
  webkit: '/',
};

/** Default CPUs and memory (MiB) of a BrowserBox (spec 002). */
export const BROWSERBOX_CPUS = 2;
/** Default memory of a BrowserBox, MiB (spec 002). */
export const BROWSERBOX_MEMORY_MIB = 2048;
/** Default `start()` timeout, seconds. */
export const BROWSERBOX_START_TIMEOUT = 60;
/** Chromium itself listens on `port + offset` on the box's loopback; socat serves `port`. */
export const BROWSERBOX_INTERNAL_PORT_OFFSET = 10000;

const WHY_UNAVAILABLE: Record<'webkit', string> = {
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
   * @throws BoxError (field `browser`) for an unknown browser type, or for `webkit`, which has no usable
   *   remote-debugging build in Debian (see the README).
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
      throw new BoxError(`browser '${browser}' is not available: ${WHY_UNAVAILABLE[browser as 'webkit']}`, {
        field: 'browser',
      });
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
      const hostPort = SAME_PORT_ON_HOST[this.browser] ? { hostPort: this.#port } : {};
      options.ports = [...ports, { guestPort: this.#port, ...hostPort, hostIp: '127.0.0.1' }];
    }
    return options;
  }

  /**
   * Starts the box if needed and the browser in it, and resolves once its debugging endpoint answers
   * from the host (`GET /json/version`). Calling it again after success is a no-op.
   *
   * The budget covers the browser only: creating the box first (pulling and unpacking the browser's image
   * when the runtime does not hold it yet) is not counted, so a slow pull never shows up as a browser
   * that does not answer; the pull reports its own errors (`BoxError` with code `image`).
   * @param timeout seconds to wait for the browser (default 60), counted from the moment the box runs.
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
    const box = await this.ensureStarted();
    const deadline = performance.now() + timeout * 1000;
    const samePort = SAME_PORT_ON_HOST[this.browser] === true;
    const internal = samePort ? this.#port : this.#port + BROWSERBOX_INTERNAL_PORT_OFFSET;
    // socat serves the spec's port to the box network: on every interface, or on the box's own address
    // when the browser itself holds the port on loopback (no such address with network disabled: the
    // relay then reaches the browser directly).
    const listen = samePort ? `${this.#port},bind=${GUEST_IP}` : String(this.#port);
    const script = [
      `socat TCP-LISTEN:${listen},fork,reuseaddr TCP:127.0.0.1:${internal} 2>/dev/null &`,
      LAUNCH[this.browser]!(internal),
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
    this.#hostPort = await hostPortOf(box, this.#port, samePort ? this.#port : 0);
    const { host, port } = this.#hostPort;
    const base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
    while (performance.now() < deadline) {
      if (exited !== null) {
        throw new BoxError(
          `${this.browser} exited with code ${exited} during start: ${stderrTail.trim().split('\n').slice(-5).join('\n')}`,
          { code: 'exec' },
        );
      }
      if (await answers(`${base}${READY_PATH[this.browser]}`, this.browser !== 'chromium')) {
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
    if (!this.#endpoint)
      throw new BoxError('the browser is not started; call start() first', { code: 'conflict' });
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

/** True when `url` answers within 2 s: with 200, or with any HTTP status when `anyStatus`. */
async function answers(url: string, anyStatus: boolean): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.ok || anyStatus;
  } catch {
    return false;
  }
}
