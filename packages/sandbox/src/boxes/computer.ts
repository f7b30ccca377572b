/**
 * `ComputerBox` (spec 002 "ComputerBox"): a box running a desktop — Xvfb (1024 × 768 × 24) with the jwm
 * window manager and an xterm — automated with `xdotool` (mouse, keyboard) and `scrot` (PNG
 * screenshots), and viewable in a web browser through x11vnc + noVNC/websockify: HTTP on port 3000 and
 * HTTPS (self-signed certificate) on 3001 in the box, reachable on the host's 127.0.0.1 at `guiHttpPort` /
 * `guiHttpsPort`, or at ports picked when the box starts for a GUI port of 0 (port publication when the
 * runtime has it, else a relay, see `browser-relay.ts`).
 * Image: `seed/desktop:latest`, built from Debian packages by `scripts/images-desktop.ts`.
 */
import {
  COMPUTERBOX_CPUS,
  COMPUTERBOX_DISPLAY_HEIGHT,
  COMPUTERBOX_DISPLAY_WIDTH,
  COMPUTERBOX_GUI_HTTP_PORT,
  COMPUTERBOX_GUI_HTTPS_PORT,
  COMPUTERBOX_MEMORY_MIB,
  DESKTOP_READY_TIMEOUT,
} from '../constants.ts';
import { BoxError, ExecError, ParseError, TimeoutError } from '../errors.ts';
import type { JsBoxOptions, Screenshot } from '../types.ts';
import { type HostPort, hostPortOf } from './browser-relay.ts';
import { formatCommand, SimpleBox, type SimpleBoxOptions } from './simple.ts';

/** Options of `ComputerBox`: those of `SimpleBox` plus the GUI ports (spec 002); 2 CPUs, 2048 MiB by default. */
export interface ComputerBoxOptions extends SimpleBoxOptions {
  /**
   * Host port (127.0.0.1) of the browser-viewable desktop, noVNC over HTTP; default 3000. 0: a free port
   * picked when the box starts, bound at once (read it back from `guiUrls()`).
   */
  guiHttpPort?: number;
  /**
   * Host port (127.0.0.1) of the same desktop over HTTPS (self-signed certificate); default 3001. 0: a
   * free port picked when the box starts, as for `guiHttpPort`.
   */
  guiHttpsPort?: number;
}

/** Image of every ComputerBox. */
export const COMPUTERBOX_IMAGE = 'seed/desktop:latest';
/** X display of the desktop in the box. */
export const COMPUTERBOX_DISPLAY = ':1';
/** Default number of wheel clicks of `scroll`. */
export const COMPUTERBOX_SCROLL_AMOUNT = 3;
/** Scroll directions (spec 002) and the X pointer buttons that scroll that way. */
export const SCROLL_BUTTONS = { up: 4, down: 5, left: 6, right: 7 } as const;
/** `up`, `down`, `left` or `right`. */
export type ScrollDirection = keyof typeof SCROLL_BUTTONS;

/** Desktop session started once in the box: X server, window manager, terminal, VNC and noVNC. */
function desktopScript(): string {
  const httpPort = COMPUTERBOX_GUI_HTTP_PORT;
  const httpsPort = COMPUTERBOX_GUI_HTTPS_PORT;
  const w = COMPUTERBOX_DISPLAY_WIDTH;
  const h = COMPUTERBOX_DISPLAY_HEIGHT;
  return `
set -e
mkdir -p /tmp/desktop && cd /tmp/desktop
Xvfb ${COMPUTERBOX_DISPLAY} -screen 0 ${w}x${h}x24 -nolisten tcp -ac >xvfb.log 2>&1 &
i=0; until xdpyinfo >/dev/null 2>&1; do i=$((i+1)); [ $i -lt 300 ] || exit 1; sleep 0.05; done
jwm >jwm.log 2>&1 &
(cd /root && exec xterm -geometry 80x24+40+40) >xterm.log 2>&1 &
x11vnc -display ${COMPUTERBOX_DISPLAY} -forever -shared -nopw -localhost -rfbport 5900 -quiet >x11vnc.log 2>&1 &
[ -f gui.pem ] || openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=computerbox \\
  -keyout gui.pem -out gui.pem >/dev/null 2>&1
websockify --web /usr/share/novnc 0.0.0.0:${httpPort} localhost:5900 >novnc-http.log 2>&1 &
websockify --web /usr/share/novnc --cert gui.pem --ssl-only 0.0.0.0:${httpsPort} localhost:5900 >novnc-https.log 2>&1 &
touch started
`;
}

/** Validates a pixel coordinate or count. @throws BoxError naming `field`. */
function pixel(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new BoxError(`invalid ${field}: must be a non-negative integer number of pixels`, { field });
  }
  return value;
}

/**
 * The xdotool arguments that move the pointer to (`x`, `y`) pixels and wait until it is there.
 * @throws BoxError naming `xField` or `yField` when a coordinate is not a non-negative integer.
 */
function moveTo(x: number, y: number, xField: string, yField: string): string[] {
  return ['mousemove', '--sync', String(pixel(x, xField)), String(pixel(y, yField))];
}

/** A desktop GUI automation box (spec 002 `ComputerBox`). */
export class ComputerBox extends SimpleBox {
  /** Host port (127.0.0.1) of the desktop viewer over HTTP; 0: picked at start (see `guiUrls()`). */
  readonly guiHttpPort: number;
  /** Host port (127.0.0.1) of the desktop viewer over HTTPS; 0: picked at start (see `guiUrls()`). */
  readonly guiHttpsPort: number;
  #desktop: Promise<void> | null = null;
  #gui: HostPort[] = [];

  /**
   * @param options SimpleBox options plus `guiHttpPort` (3000) and `guiHttpsPort` (3001), 0 for a port
   *   picked at start; nothing is created until the first operation.
   * @throws BoxError naming the port field when it is not 0–65535 or both equal and not 0.
   */
  constructor(options: ComputerBoxOptions = {}) {
    super(options, { image: COMPUTERBOX_IMAGE, cpus: COMPUTERBOX_CPUS, memoryMib: COMPUTERBOX_MEMORY_MIB });
    const port = (value: unknown, field: string, fallback: number): number => {
      if (value === undefined) return fallback;
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 65535) {
        throw new BoxError(`invalid box option ${field}: must be an integer port 0–65535`, { field });
      }
      return value;
    };
    this.guiHttpPort = port(options.guiHttpPort, 'guiHttpPort', COMPUTERBOX_GUI_HTTP_PORT);
    this.guiHttpsPort = port(options.guiHttpsPort, 'guiHttpsPort', COMPUTERBOX_GUI_HTTPS_PORT);
    if (this.guiHttpPort !== 0 && this.guiHttpPort === this.guiHttpsPort) {
      throw new BoxError('invalid box option guiHttpsPort: must differ from guiHttpPort', {
        field: 'guiHttpsPort',
      });
    }
  }

  /**
   * Box options with `DISPLAY` set and the GUI ports published on the host's 127.0.0.1 (the VNC session
   * has no password, so it is never exposed beyond this machine by default); a GUI port of 0 is published
   * without a host port, which the runtime picks and binds.
   */
  protected override boxOptions(): JsBoxOptions {
    const options = super.boxOptions();
    options.env = [
      ...(options.env ?? []).filter((e) => e.key !== 'DISPLAY'),
      { key: 'DISPLAY', value: COMPUTERBOX_DISPLAY },
    ];
    const ports = options.ports ?? [];
    const gui: [number, number][] = [
      [COMPUTERBOX_GUI_HTTP_PORT, this.guiHttpPort],
      [COMPUTERBOX_GUI_HTTPS_PORT, this.guiHttpsPort],
    ];
    for (const [guestPort, hostPort] of gui) {
      if (!ports.some((p) => p.guestPort === guestPort))
        ports.push({ guestPort, ...(hostPort ? { hostPort } : {}), hostIp: '127.0.0.1' });
    }
    options.ports = ports;
    return options;
  }

  /** Starts the box and its desktop session once (concurrent callers share it). */
  #ensureDesktop(): Promise<void> {
    this.#desktop ??= (async () => {
      const box = await this.ensureStarted();
      const r = await this.runCommand('sh', ['-c', desktopScript()], undefined, {});
      if (r.exitCode !== 0) {
        throw new BoxError(`the desktop did not start (exit ${r.exitCode}): ${r.stderr.trim().slice(-500)}`, {
          code: 'exec',
        });
      }
      for (const gui of this.#gui.splice(0)) gui.close();
      this.#gui.push(await hostPortOf(box, COMPUTERBOX_GUI_HTTP_PORT, this.guiHttpPort));
      this.#gui.push(await hostPortOf(box, COMPUTERBOX_GUI_HTTPS_PORT, this.guiHttpsPort));
    })().catch((error) => {
      this.#desktop = null;
      throw error;
    });
    return this.#desktop;
  }

  /** Runs `cmd` in the box's desktop; returns stdout. @throws ExecError on a non-zero exit. */
  async #run(cmd: string, args: string[]): Promise<string> {
    await this.#ensureDesktop();
    const r = await this.runCommand(cmd, args, undefined, {});
    if (r.exitCode !== 0) throw new ExecError(formatCommand(cmd, args), r.exitCode, r.stderr);
    return r.stdout;
  }

  async #xdotool(...args: string[]): Promise<string> {
    return this.#run('xdotool', args);
  }

  /**
   * Starts the box and desktop if needed and returns the URLs of the browser-viewable desktop (noVNC) on
   * the host: `{ http: 'http://127.0.0.1:<guiHttpPort>/vnc.html', https: 'https://…:<guiHttpsPort>/vnc.html' }`
   * (the HTTPS certificate is self-signed). @throws BoxError when the desktop or a GUI port cannot start.
   */
  async guiUrls(): Promise<{ http: string; https: string }> {
    await this.#ensureDesktop();
    const [http, https] = this.#gui;
    if (!http || !https) throw new BoxError('the desktop GUI ports are not available', { code: 'conflict' });
    return {
      http: `http://${http.host}:${http.port}/vnc.html`,
      https: `https://${https.host}:${https.port}/vnc.html`,
    };
  }

  /**
   * Starts the box and desktop if needed and waits until the X display answers and the window manager
   * runs (spec 002 `waitUntilReady`).
   *
   * The budget covers the desktop only: creating the box first (pulling and unpacking the desktop image
   * when the runtime does not hold it yet, which can take minutes on a cold machine) is not counted, so a
   * slow pull never shows up as an unready desktop. The pull reports its own progress and errors
   * (`BoxError` with code `image`); pull the image ahead with `runtime.images.pull(COMPUTERBOX_IMAGE)`.
   * @param timeout seconds (default `DESKTOP_READY_TIMEOUT`, 60), counted from the moment the box runs.
   * @throws TimeoutError when the desktop is not ready in time; BoxError when it failed to start.
   */
  async waitUntilReady(timeout: number = DESKTOP_READY_TIMEOUT): Promise<void> {
    if (typeof timeout !== 'number' || !(timeout > 0)) {
      throw new BoxError('invalid timeout: must be a positive number of seconds', { field: 'timeout' });
    }
    await this.ensureStarted();
    const deadline = performance.now() + timeout * 1000;
    const ready = (async () => {
      await this.#ensureDesktop();
      const check =
        'xdpyinfo >/dev/null 2>&1 && pgrep -x jwm >/dev/null && pgrep -x x11vnc >/dev/null && ' +
        'xdotool search --class xterm >/dev/null';
      for (;;) {
        const r = await this.runCommand('sh', ['-c', check], undefined, {});
        if (r.exitCode === 0) return;
        if (performance.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new TimeoutError(`the desktop was not ready within ${timeout} s`);
    })();
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new TimeoutError(`the desktop was not ready within ${timeout} s`)),
        timeout * 1000,
      );
    });
    try {
      await Promise.race([ready, expired]);
    } finally {
      clearTimeout(timer);
      ready.catch(() => {});
    }
  }

  /** Moves the pointer to (`x`, `y`) pixels. @throws BoxError for a bad coordinate; ExecError from xdotool. */
  async mouseMove(x: number, y: number): Promise<void> {
    await this.#xdotool(...moveTo(x, y, 'x', 'y'));
  }

  /** Clicks the left button where the pointer is. */
  async leftClick(): Promise<void> {
    await this.#xdotool('click', '1');
  }

  /** Clicks the right button where the pointer is. */
  async rightClick(): Promise<void> {
    await this.#xdotool('click', '3');
  }

  /** Clicks the middle button where the pointer is. */
  async middleClick(): Promise<void> {
    await this.#xdotool('click', '2');
  }

  /** Double-clicks the left button where the pointer is. */
  async doubleClick(): Promise<void> {
    await this.#xdotool('click', '--repeat', '2', '--delay', '80', '1');
  }

  /** Triple-clicks the left button where the pointer is. */
  async tripleClick(): Promise<void> {
    await this.#xdotool('click', '--repeat', '3', '--delay', '80', '1');
  }

  /** Presses the left button at (`startX`, `startY`), moves to (`endX`, `endY`) and releases it. */
  async leftClickDrag(startX: number, startY: number, endX: number, endY: number): Promise<void> {
    await this.#xdotool(
      ...moveTo(startX, startY, 'startX', 'startY'),
      'mousedown',
      '1',
      ...moveTo(endX, endY, 'endX', 'endY'),
      'mouseup',
      '1',
    );
  }

  /**
   * The pointer position `[x, y]` in pixels.
   * @throws ParseError when xdotool's answer cannot be parsed.
   */
  async cursorPosition(): Promise<[number, number]> {
    return parseCursorPosition(await this.#xdotool('getmouselocation', '--shell'));
  }

  /** Types `text` as keystrokes into the focused window (UTF-8; newlines press Return). */
  async type(text: string): Promise<void> {
    if (typeof text !== 'string') throw new BoxError('invalid text: must be a string', { field: 'text' });
    if (text === '') return;
    await this.#xdotool('type', '--delay', '12', '--', text);
  }

  /**
   * Presses keys in xdotool syntax (spec 002): a space separates consecutive presses, `+` joins a chord,
   * e.g. `Return`, `ctrl+c`, `ctrl+shift+s`, `alt+Tab`, `ctrl+a Delete`; `super` is the Super key.
   * @throws BoxError (field `keySequence`) for an empty sequence or an unknown key name (the known keys of
   *   the sequence are pressed); ExecError when xdotool fails.
   */
  async key(keySequence: string): Promise<void> {
    if (typeof keySequence !== 'string' || keySequence.trim() === '') {
      throw new BoxError('invalid keySequence: must be a non-empty xdotool key sequence', {
        field: 'keySequence',
      });
    }
    const keys = keySequence.trim().split(/\s+/);
    if (keys.some((k) => k.startsWith('-') || k.split('+').some((part) => part === ''))) {
      throw new BoxError(`invalid keySequence '${keySequence}': empty key in a chord`, {
        field: 'keySequence',
      });
    }
    await this.#ensureDesktop();
    const args = ['key', '--delay', '20', '--', ...keys];
    const r = await this.runCommand('xdotool', args, undefined, {});
    if (r.exitCode !== 0) throw new ExecError(formatCommand('xdotool', args), r.exitCode, r.stderr);
    // xdotool skips unknown key names with a warning and exits 0: surface them (nothing was half-typed
    // on purpose by the caller, but the caller must know the sequence was not what it meant).
    const unknown = /No such key name '([^']*)'/.exec(r.stderr);
    if (unknown) {
      throw new BoxError(
        `invalid keySequence '${keySequence}': unknown key name '${unknown[1]}' (xdotool syntax)`,
        {
          field: 'keySequence',
        },
      );
    }
  }

  /**
   * Scrolls at (`x`, `y`): moves the pointer there and turns the wheel `amount` clicks (default 3) in
   * `direction` (`up`, `down`, `left`, `right`). @throws BoxError naming the bad argument.
   */
  async scroll(
    x: number,
    y: number,
    direction: ScrollDirection,
    amount = COMPUTERBOX_SCROLL_AMOUNT,
  ): Promise<void> {
    if (!Object.hasOwn(SCROLL_BUTTONS, direction)) {
      throw new BoxError(`invalid direction '${String(direction)}': must be up, down, left or right`, {
        field: 'direction',
      });
    }
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount < 1) {
      throw new BoxError('invalid amount: must be a positive integer number of wheel clicks', {
        field: 'amount',
      });
    }
    await this.#xdotool(
      ...moveTo(x, y, 'x', 'y'),
      'click',
      '--repeat',
      String(amount),
      String(SCROLL_BUTTONS[direction]),
    );
  }

  /** Size of the display `[width, height]` in pixels (1024 × 768). @throws ParseError on bad output. */
  async getScreenSize(): Promise<[number, number]> {
    const out = await this.#xdotool('getdisplaygeometry');
    const m = /^(\d+) (\d+)\s*$/.exec(out);
    if (!m) throw new ParseError(`cannot parse the screen size from xdotool output '${out.trim()}'`);
    return [Number(m[1]), Number(m[2])];
  }

  /**
   * A PNG screenshot of the whole display (spec 002 `Screenshot`): `data` base64, `width`, `height`
   * (read from the PNG header), `format` `png`. @throws ParseError when the output is not a PNG.
   */
  async screenshot(): Promise<Screenshot> {
    const file = `/tmp/screenshot-${process.pid}-${Date.now()}.png`;
    const data = (
      await this.#run('sh', ['-c', `scrot --overwrite "$1" && base64 -w0 "$1"; rm -f "$1"`, 'sh', file])
    ).trim();
    const png = Buffer.from(data, 'base64');
    const [width, height] = pngSize(png);
    return { data, width, height, format: 'png' };
  }

  /** Stops the box (removed when `autoRemove`, the default); the desktop starts again on next use. */
  override async stop(): Promise<void> {
    await this.#desktop?.catch(() => {});
    this.#desktop = null;
    for (const gui of this.#gui.splice(0)) gui.close();
    await super.stop();
  }
}

/** Parses `xdotool getmouselocation --shell` output (`X=…`, `Y=…` lines). @throws ParseError. */
export function parseCursorPosition(output: string): [number, number] {
  const x = /^X=(\d+)$/m.exec(output);
  const y = /^Y=(\d+)$/m.exec(output);
  if (!x || !y) {
    throw new ParseError(
      `cannot parse the cursor position from xdotool output '${output.trim().slice(0, 200)}'`,
    );
  }
  return [Number(x[1]), Number(y[1])];
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** Width and height from a PNG's IHDR chunk (PNG spec §11.2.2). @throws ParseError when it is not a PNG. */
export function pngSize(png: Buffer): [number, number] {
  if (
    png.length < 24 ||
    !png.subarray(0, 8).equals(PNG_SIGNATURE) ||
    png.toString('latin1', 12, 16) !== 'IHDR'
  ) {
    throw new ParseError('the screenshot is not a PNG image');
  }
  return [png.readUInt32BE(16), png.readUInt32BE(20)];
}
