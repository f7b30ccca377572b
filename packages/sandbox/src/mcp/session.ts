/**
 * One MCP session: the boxes it created (tagged with the session by their name
 * `mcp-<session>-<n>` and removed when the session ends unless created with `persist`), its limits
 * (boxes, vCPUs, memory, lifetime from {@link McpConfig}), its background commands, and the log of its
 * tool calls.
 */
import { randomBytes } from 'node:crypto';
import type { ComputerBox } from '../boxes/computer.ts';
import { BoxError } from '../errors.ts';
import type { JsBox } from '../runtime/box.ts';
import type { JsExecution } from '../runtime/execution.ts';
import type { McpConfig } from './config.ts';
import type { BoundedOutput } from './output.ts';
import type { BoxProvider } from './provider.ts';
import type { SessionBrowser } from './tools-browser.ts';

/** One line of the tool call log: never arguments nor output (they may hold secrets). */
export interface ToolLogEntry {
  session: string;
  tool: string;
  /** Box id or name the call named, when it named one. */
  box?: string;
  outcome: 'ok' | 'error' | 'cancelled';
  /** `BoxError` code of a failed call. */
  code?: string;
  durationMs: number;
}

/** Receives every tool call's {@link ToolLogEntry}. */
export type ToolLogger = (entry: ToolLogEntry) => void;

/** What a session knows of a box it created. */
export interface SessionBox {
  id: string;
  kind: BoxKind;
  cpus: number;
  memoryMib: number;
  /** Kept when the session ends. */
  persist: boolean;
}

/** Handles of boxes made by other sessions that one session keeps (see `McpSession.box`). */
export const SEEN_HANDLES = 64;

/** Kinds of box `create_box` makes. */
export type BoxKind = 'simple' | 'code' | 'computer' | 'browser';

/** A command started by `start_command`. */
export interface BackgroundCommand {
  id: string;
  boxId: string;
  execution: JsExecution;
  stdout: BoundedOutput;
  stderr: BoundedOutput;
  /** Exit code once finished, else null. */
  exitCode: number | null;
  done: Promise<void>;
}

/** The state of one MCP session; `close()` ends it. */
export class McpSession {
  /** Random session id (also the tag in box names). */
  readonly id: string;
  readonly provider: BoxProvider;
  readonly config: McpConfig;
  readonly log: ToolLogger;
  readonly boxes = new Map<string, SessionBox>();
  readonly commands = new Map<string, BackgroundCommand>();
  /** Commands of `exec` calls in progress (killed when the session ends). */
  readonly running = new Set<JsExecution>();
  /** Computer boxes of this session by id (their desktop is driven from this process). */
  readonly computers = new Map<string, ComputerBox>();
  /** Browser boxes of this session by id (their endpoint relay runs in this process). */
  readonly browsers = new Map<string, SessionBrowser>();
  readonly #handles = new Map<string, JsBox>();
  /** Handles of other boxes this session named by id, least recently used first. */
  readonly #seen = new Map<string, JsBox>();
  #counter = 0;
  #reserved = { boxes: 0, cpus: 0, memoryMib: 0 };
  #closed = false;

  constructor(
    provider: BoxProvider,
    config: McpConfig,
    log: ToolLogger,
    id = randomBytes(4).toString('hex'),
  ) {
    this.provider = provider;
    this.config = config;
    this.log = log;
    this.id = id;
  }

  /** The next box name of this session. */
  nextName(): string {
    this.#counter += 1;
    return `mcp-${this.id}-${this.#counter}`;
  }

  /**
   * Reserves room for a box of `cpus` and `memoryMib` under the session limits until `release`.
   * @throws BoxError `quota_exceeded` naming `boxes`, `cpus` or `memory_mib`; `conflict` once closed.
   */
  reserve(cpus: number, memoryMib: number): () => void {
    if (this.#closed) throw new BoxError('the MCP session has ended', { code: 'conflict' });
    const r = this.#reserved;
    const used = this.#usage();
    const check = (field: string, now: number, add: number, max: number) => {
      if (now + add > max) {
        throw new BoxError(
          `quota exceeded: this session may hold ${max} ${field} in all (holds ${now}, asked ${add})`,
          { code: 'quota_exceeded', field },
        );
      }
    };
    check('boxes', used.boxes + r.boxes, 1, this.config.maxBoxes);
    check('cpus', used.cpus + r.cpus, cpus, this.config.maxCpus);
    check('memory_mib', used.memoryMib + r.memoryMib, memoryMib, this.config.maxMemoryMib);
    r.boxes += 1;
    r.cpus += cpus;
    r.memoryMib += memoryMib;
    return () => {
      r.boxes -= 1;
      r.cpus -= cpus;
      r.memoryMib -= memoryMib;
    };
  }

  #usage(): { boxes: number; cpus: number; memoryMib: number } {
    let cpus = 0;
    let memoryMib = 0;
    for (const box of this.boxes.values()) {
      cpus += box.cpus;
      memoryMib += box.memoryMib;
    }
    return { boxes: this.boxes.size, cpus, memoryMib };
  }

  /**
   * The box `idOrName` the caller sees. Handles of this session's boxes, and of the last
   * {@link SEEN_HANDLES} other boxes the session named by id, are kept by id, so that a call on them
   * skips the provider's lookup (a box removed meanwhile answers `not_found` from its handle). Names are
   * looked up every time (a name may be given to another box later). @throws BoxError `not_found`.
   */
  async box(idOrName: string): Promise<JsBox> {
    const own = this.#handles.get(idOrName);
    if (own) return own;
    const seen = this.#seen.get(idOrName);
    if (seen) {
      // Most recently used last.
      this.#seen.delete(idOrName);
      this.#seen.set(idOrName, seen);
      return seen;
    }
    const box = await this.provider.get(idOrName);
    if (box.id === idOrName) {
      this.#seen.set(box.id, box);
      if (this.#seen.size > SEEN_HANDLES) this.#seen.delete(this.#seen.keys().next().value as string);
    }
    return box;
  }

  /** Records box `box`, created by this session. */
  adopt(box: JsBox, entry: SessionBox): void {
    this.boxes.set(box.id, entry);
    this.#handles.set(box.id, box);
  }

  /** The background command `id` of this session. @throws BoxError `not_found`. */
  command(id: string): BackgroundCommand {
    const command = this.commands.get(id);
    if (!command)
      throw new BoxError(`no command '${id}' in this session`, { code: 'not_found', field: 'command_id' });
    return command;
  }

  /** Forgets box `id` (removed by a tool). */
  forget(id: string): void {
    this.boxes.delete(id);
    this.#handles.delete(id);
    this.#seen.delete(id);
    this.computers.delete(id);
    this.browsers.delete(id);
    for (const [key, command] of this.commands) if (command.boxId === id) this.commands.delete(key);
  }

  /**
   * Ends the session: kills its background commands and removes the boxes it created without
   * `persist`. Errors of single removals are ignored (the box may be gone already). Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const quietly = (work: Promise<unknown> | undefined) => (work ?? Promise.resolve()).catch(() => {});
    const kills = [
      ...[...this.commands.values()].filter((c) => c.exitCode === null).map((c) => c.execution.kill()),
      ...[...this.running].map((execution) => execution.kill()),
    ];
    await Promise.all(kills.map(quietly));
    this.commands.clear();
    this.running.clear();
    // Every box of the session goes at once: removed through the provider (on a node, that also ends
    // the tenant's record of it), then the forwarders and relays of computer and browser boxes, which
    // run in this process, are stopped with their box objects (whose box is gone by then).
    for (const [id, browser] of this.browsers)
      if (this.boxes.get(id)?.persist) await quietly(browser.onClose?.());
    const doomed = [...this.boxes.values()].filter((b) => !b.persist);
    await Promise.all(
      doomed.map(async (b) => {
        const browser = this.browsers.get(b.id);
        await quietly(browser?.onClose?.());
        await quietly(this.provider.remove(b.id));
        await quietly(browser?.box.stop());
        await quietly(this.computers.get(b.id)?.stop());
      }),
    );
    this.computers.clear();
    this.browsers.clear();
    for (const b of doomed) this.forget(b.id);
  }

  /** True once `close()` was called. */
  get closed(): boolean {
    return this.#closed;
  }
}
