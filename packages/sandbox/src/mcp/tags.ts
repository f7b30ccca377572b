/**
 * Session tags of persisted boxes: a box created by an MCP session with `persist` outlives the session,
 * and `list_boxes` / `box_info` of later sessions name the session that made it (`mcp_session`). A tag is
 * one small file per box under `<runtime homeDir>/mcp/tags/<box id>` holding the session id, so several
 * MCP servers on one home (stdio processes, a `sandbox serve` node) share them without a lock; tags of
 * boxes that no longer exist are dropped when boxes are listed.
 */
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Box ids as the runtime makes them (ULIDs); anything else is never used as a file name. */
const BOX_ID = /^[0-9A-Za-z]{1,64}$/;
/** Session ids as `McpSession` makes them (hex). */
const SESSION_ID = /^[0-9a-f]{1,64}$/;

/** The session tags of one runtime home. */
export class BoxTags {
  readonly #dir: string;

  /** @param homeDir the runtime's home directory (tags live in `<homeDir>/mcp/tags`). */
  constructor(homeDir: string) {
    this.#dir = join(homeDir, 'mcp', 'tags');
  }

  /** Tags box `boxId` with session `session`. @throws the file system error of the write. */
  async set(boxId: string, session: string): Promise<void> {
    if (!BOX_ID.test(boxId) || !SESSION_ID.test(session)) return;
    await mkdir(this.#dir, { recursive: true, mode: 0o700 });
    await writeFile(join(this.#dir, boxId), session, { mode: 0o600 });
  }

  /** Drops the tag of box `boxId` (none: nothing happens). */
  async drop(boxId: string): Promise<void> {
    if (BOX_ID.test(boxId)) await rm(join(this.#dir, boxId), { force: true });
  }

  /**
   * The sessions of the tagged boxes among `boxIds`; when `existing` is given (every box id of the
   * runtime), tags of boxes not among them are dropped. `existing` is read after the tags, so that a box
   * tagged meanwhile is never taken for a removed one.
   */
  async read(boxIds: string[], existing?: () => Promise<ReadonlySet<string>>): Promise<Map<string, string>> {
    const tags = new Map<string, string>();
    let names: string[];
    try {
      names = await readdir(this.#dir);
    } catch {
      return tags;
    }
    const live = existing ? await existing() : undefined;
    const wanted = new Set(boxIds);
    for (const name of names) {
      if (live && !live.has(name)) {
        await this.drop(name).catch(() => {});
        continue;
      }
      if (!wanted.has(name)) continue;
      const session = (await readFile(join(this.#dir, name), 'utf8').catch(() => '')).trim();
      if (SESSION_ID.test(session)) tags.set(name, session);
    }
    return tags;
  }
}
