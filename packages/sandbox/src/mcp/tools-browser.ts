/**
 * Browser tools on a `BrowserBox`: `create_box` with kind `browser` starts Chromium in a
 * box with its DevTools endpoint reachable from this process; `navigate` opens a URL in its page,
 * `screenshot` (`tools-computer.ts`) returns the page as PNG image content, and `cdp_endpoint` gives the endpoint to
 * drive it with Playwright or Puppeteer. Pages are driven with `playwright-core` over CDP. Browser boxes
 * are made by this process (`BrowserBox` relays the endpoint from here), so they need a provider with a
 * local runtime.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Browser, Page } from 'playwright-core';
import { z } from 'zod';
import { BROWSERBOX_CPUS, BROWSERBOX_MEMORY_MIB, BrowserBox } from '../boxes/browser.ts';
import { type GuiBoxRequest, guiBoxOf, startGuiBox } from './gui-box.ts';
import type { McpSession } from './session.ts';
import { defineTool } from './tool.ts';

/** A browser box of a session and its CDP connection (opened on first use). */
export interface SessionBrowser {
  box: BrowserBox;
  page: Promise<{ browser: Browser; page: Page }> | null;
  /** Closes the CDP connection (the browser keeps running). */
  onClose?: () => Promise<void>;
}

/**
 * Creates a Chromium browser box for `session` and waits for its endpoint; returns its id.
 * @throws BoxError `unsupported` without a local runtime, `quota_exceeded` over the session limits.
 */
export async function createBrowser(session: McpSession, request: GuiBoxRequest): Promise<string> {
  const { id, box } = await startGuiBox(session, request, {
    kind: 'browser',
    defaults: { cpus: BROWSERBOX_CPUS, memoryMib: BROWSERBOX_MEMORY_MIB },
    why: 'relays their endpoint',
    make: (options) => new BrowserBox({ ...options, browser: 'chromium' }),
    ready: (box) => box.start(),
  });
  const entry: SessionBrowser = { box, page: null };
  entry.onClose = () => disconnectBrowser(entry);
  session.browsers.set(id, entry);
  return id;
}

/** The browser box `idOrName` of this session. @throws BoxError `invalid_option` (field `box`). */
function browserOf(session: McpSession, idOrName: string): Promise<SessionBrowser> {
  return guiBoxOf(session, session.browsers, 'browser', idOrName);
}

/** The page of a browser box (the first of its default context), connected over CDP once. */
function pageOf(browser: SessionBrowser): Promise<{ browser: Browser; page: Page }> {
  browser.page ??= (async () => {
    const { chromium } = await import('playwright-core');
    const connected = await chromium.connectOverCDP(browser.box.endpoint());
    const context = connected.contexts()[0] ?? (await connected.newContext());
    const page = context.pages()[0] ?? (await context.newPage());
    return { browser: connected, page };
  })().catch((error) => {
    browser.page = null;
    throw error;
  });
  return browser.page;
}

/**
 * A PNG screenshot of the page of browser box `id` of `session`, or null when it is not one (the
 * `screenshot` tool serves computer and browser boxes).
 */
export async function browserScreenshot(session: McpSession, id: string): Promise<Buffer | null> {
  const browser = session.browsers.get(id);
  if (!browser) return null;
  const { page } = await pageOf(browser);
  return page.screenshot({ type: 'png' });
}

/** Closes the CDP connection of `browser` (the browser keeps running). */
export async function disconnectBrowser(browser: SessionBrowser): Promise<void> {
  const open = await browser.page?.catch(() => null);
  await open?.browser.close().catch(() => {});
}

const boxArg = z.string().min(1).describe("box id or name of a box created with kind 'browser'");

/** Registers the browser tools. */
export function browserTools(server: McpServer, session: McpSession): void {
  defineTool(server, session, {
    name: 'navigate',
    title: 'Open a URL in the browser',
    description:
      'Opens a URL in the page of a browser box and waits for its load event; returns the final URL and ' +
      'the page title. The box reaches only destinations its network allows.',
    input: {
      box: boxArg,
      url: z.string().url().max(8192),
      timeout_seconds: z.number().positive().max(300).default(30),
    },
    output: { url: z.string(), title: z.string(), status: z.number().nullable() },
    async run(args) {
      const { page } = await pageOf(await browserOf(session, args.box));
      const response = await page.goto(args.url, { timeout: args.timeout_seconds * 1000, waitUntil: 'load' });
      return { result: { url: page.url(), title: await page.title(), status: response?.status() ?? null } };
    },
  });

  defineTool(server, session, {
    name: 'cdp_endpoint',
    title: 'DevTools endpoint of the browser',
    description:
      'The Chrome DevTools Protocol endpoint (http://127.0.0.1:<port>, on the host of this server) of a ' +
      "browser box, for Playwright's connectOverCDP or Puppeteer's connect.",
    input: { box: boxArg },
    output: { endpoint: z.string() },
    readOnly: true,
    async run(args) {
      const browser = await browserOf(session, args.box);
      return { result: { endpoint: browser.box.endpoint() } };
    },
  });
}
