/**
 * Computer-use tools on a `ComputerBox`: `create_box` with kind
 * `computer` starts an X desktop box (1024×768, `seed/desktop:latest`), and `screenshot` (PNG image
 * content), `click`, `double_click`, `drag`, `type_text`, `key`, `scroll`, `cursor_position` drive it
 * through xdotool — the action set of agents' computer-use loops. Computer boxes are made by this process
 * (`ComputerBox` forwards its GUI ports from here), so they need a provider with a local runtime
 * (`sandbox mcp` on the local runtime, or `/mcp` on `sandbox serve`).
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { ComputerBox, pngSize } from '../boxes/computer.ts';
import { COMPUTERBOX_CPUS, COMPUTERBOX_MEMORY_MIB } from '../constants.ts';
import { type GuiBoxRequest, guiBoxOf, startGuiBox } from './gui-box.ts';
import type { McpSession } from './session.ts';
import { defineTool } from './tool.ts';
import { browserScreenshot } from './tools-browser.ts';

/**
 * Creates a computer box for `session` and waits until its desktop is ready; returns its id.
 * @throws BoxError `unsupported` without a local runtime, `quota_exceeded` over the session limits.
 */
export async function createComputer(session: McpSession, request: GuiBoxRequest): Promise<string> {
  const { id, box } = await startGuiBox(session, request, {
    kind: 'computer',
    defaults: { cpus: COMPUTERBOX_CPUS, memoryMib: COMPUTERBOX_MEMORY_MIB },
    why: 'runs their desktop forwarders',
    // GUI ports picked and bound when the box starts (several computer boxes may run at once).
    make: async (options) => new ComputerBox({ ...options, guiHttpPort: 0, guiHttpsPort: 0 }),
    ready: (box) => box.waitUntilReady(),
  });
  session.computers.set(id, box);
  return id;
}

/** The computer box `idOrName` of this session. @throws BoxError `invalid_option` (field `box`). */
function computerOf(session: McpSession, idOrName: string): Promise<ComputerBox> {
  return guiBoxOf(session, session.computers, 'computer', idOrName);
}

const boxArg = z.string().min(1).describe("box id or name of a box created with kind 'computer'");
const px = z.number().int().min(0).max(16384);
const done = { done: z.boolean() };

/** A desktop action tool: `act` drives the computer box `args.box` of the session; the answer is `{ done: true }`. */
interface ActionSpec<I extends z.ZodRawShape> {
  name: string;
  title: string;
  description: string;
  /** The arguments, `box` (the computer box) among them. */
  input: I & { box: typeof boxArg };
  act(computer: ComputerBox, args: z.infer<z.ZodObject<I>>): Promise<void>;
}

/** Registers the desktop action `spec` (see `ActionSpec`). */
function defineAction<I extends z.ZodRawShape>(
  server: McpServer,
  session: McpSession,
  spec: ActionSpec<I>,
): void {
  defineTool(server, session, {
    name: spec.name,
    title: spec.title,
    description: spec.description,
    input: spec.input,
    output: done,
    async run(args) {
      await spec.act(
        await computerOf(session, (args as { box: string }).box),
        args as z.infer<z.ZodObject<I>>,
      );
      return { result: { done: true } };
    },
  });
}

/** Registers the computer-use tools. */
export function computerTools(server: McpServer, session: McpSession): void {
  defineTool(server, session, {
    name: 'screenshot',
    title: 'Screenshot of the desktop',
    description:
      'A PNG screenshot (image content): the 1024×768 desktop of a computer box, or the visible page of a browser box.',
    input: { box: boxArg },
    output: { width: z.number(), height: z.number() },
    readOnly: true,
    async run(args) {
      const page = await browserScreenshot(session, (await session.box(args.box)).id);
      if (page) {
        const [width, height] = pngSize(page);
        return {
          result: { width, height },
          content: [{ type: 'image', data: page.toString('base64'), mimeType: 'image/png' }],
        };
      }
      const shot = await (await computerOf(session, args.box)).screenshot();
      return {
        result: { width: shot.width, height: shot.height },
        content: [{ type: 'image', data: shot.data, mimeType: 'image/png' }],
      };
    },
  });

  defineAction(server, session, {
    name: 'click',
    title: 'Click',
    description: 'Moves the pointer to (x, y) pixels of the desktop and clicks the button (default left).',
    input: { box: boxArg, x: px, y: px, button: z.enum(['left', 'right', 'middle']).default('left') },
    async act(computer, args) {
      await computer.mouseMove(args.x, args.y);
      if (args.button === 'left') await computer.leftClick();
      else if (args.button === 'right') await computer.rightClick();
      else await computer.middleClick();
    },
  });

  defineAction(server, session, {
    name: 'double_click',
    title: 'Double-click',
    description: 'Moves the pointer to (x, y) pixels and double-clicks the left button.',
    input: { box: boxArg, x: px, y: px },
    async act(computer, args) {
      await computer.mouseMove(args.x, args.y);
      await computer.doubleClick();
    },
  });

  defineAction(server, session, {
    name: 'drag',
    title: 'Drag',
    description: 'Presses the left button at (start_x, start_y), moves to (end_x, end_y) and releases it.',
    input: { box: boxArg, start_x: px, start_y: px, end_x: px, end_y: px },
    act: (computer, args) => computer.leftClickDrag(args.start_x, args.start_y, args.end_x, args.end_y),
  });

  defineAction(server, session, {
    name: 'type_text',
    title: 'Type text',
    description: 'Types text with the keyboard into the focused window (use key for Return, Tab, shortcuts).',
    input: { box: boxArg, text: z.string().min(1).max(65536) },
    act: (computer, args) => computer.type(args.text),
  });

  defineAction(server, session, {
    name: 'key',
    title: 'Press keys',
    description: "Presses a key or a combination, xdotool names: 'Return', 'ctrl+c', 'alt+Tab', 'Escape'.",
    input: { box: boxArg, keys: z.string().min(1).max(256) },
    act: (computer, args) => computer.key(args.keys),
  });

  defineAction(server, session, {
    name: 'scroll',
    title: 'Scroll',
    description: 'Scrolls at (x, y) in a direction by amount wheel clicks (default 3).',
    input: {
      box: boxArg,
      x: px,
      y: px,
      direction: z.enum(['up', 'down', 'left', 'right']),
      amount: z.number().int().min(1).max(100).default(3),
    },
    act: (computer, args) => computer.scroll(args.x, args.y, args.direction, args.amount),
  });

  defineTool(server, session, {
    name: 'cursor_position',
    title: 'Pointer position',
    description: 'Where the pointer is, in pixels of the desktop.',
    input: { box: boxArg },
    output: { x: z.number(), y: z.number() },
    readOnly: true,
    async run(args) {
      const [x, y] = await (await computerOf(session, args.box)).cursorPosition();
      return { result: { x, y } };
    },
  });
}
