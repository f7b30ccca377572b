/**
 * envd's `filesystem.Filesystem` Connect service (`proto/filesystem/filesystem.proto`) over the box's
 * files (`BoxFiles`): Stat, ListDir with depth, MakeDir, Move, Remove, WatchDir (a stream with a start
 * event, then the changes, keepalives after quiet), and the polled watchers CreateWatcher,
 * GetWatcherEvents, RemoveWatcher. Relative paths resolve against the user's home; owners and groups are
 * named from the box's `/etc/passwd` and `/etc/group`.
 */

import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import type { JsBox } from '../runtime/box.ts';
import type { FilesystemEvent as BoxEvent, JsEntryInfo, WatchHandle } from '../runtime/files/types.ts';
import { type EnvdRequest, envdKey, resolvePath } from './envd-context.ts';
import {
  type EntryInfo,
  EntryInfoSchema,
  EventType,
  type Filesystem,
  type FilesystemEvent,
  FilesystemEventSchema,
  FileType,
  type WatchDirResponse,
  WatchDirResponseSchema,
} from './gen/filesystem/filesystem_pb.ts';
import { keepaliveMsOf, StreamQueue } from './queue.ts';
import { connectErrorOf } from './wire.ts';

/** Deepest `ListDir` depth served. */
export const MAX_LIST_DEPTH = 16;
/** Most events a polled watcher keeps between two `GetWatcherEvents` calls (older ones are dropped). */
export const MAX_WATCHER_EVENTS = 10_000;
/** Most polled watchers open at once per server. */
export const MAX_WATCHERS = 1024;
/** Most boxes whose user and group names are cached. */
const NAME_CACHE_BOXES = 256;

const EVENT_TYPE: Record<BoxEvent['type'], EventType> = {
  create: EventType.CREATE,
  write: EventType.WRITE,
  remove: EventType.REMOVE,
  rename: EventType.RENAME,
  chmod: EventType.CHMOD,
};

/** uid/gid → names of each box, read from its `/etc/passwd` and `/etc/group` on first use. */
export class OwnerNames {
  readonly #cache = new Map<string, Promise<{ users: Map<number, string>; groups: Map<number, string> }>>();

  /** The names of `box`'s users and groups (ids without a name read as their number). */
  of(box: JsBox): Promise<{ users: Map<number, string>; groups: Map<number, string> }> {
    let names = this.#cache.get(box.id);
    if (!names) {
      if (this.#cache.size >= NAME_CACHE_BOXES) this.#cache.delete(this.#cache.keys().next().value as string);
      const parse = async (path: string) => {
        const map = new Map<number, string>();
        const text = await box.files.read(path).catch(() => '');
        for (const line of text.split('\n').slice(0, 10_000)) {
          const [name, , id] = line.split(':');
          if (name && id && /^\d+$/.test(id)) map.set(Number(id), name);
        }
        return map;
      };
      names = Promise.all([parse('/etc/passwd'), parse('/etc/group')]).then(([users, groups]) => ({
        users,
        groups,
      }));
      this.#cache.set(box.id, names);
    }
    return names;
  }

  /** The E2B `EntryInfo` of an entry. */
  async entry(box: JsBox, info: JsEntryInfo): Promise<EntryInfo> {
    const { users, groups } = await this.of(box);
    return create(EntryInfoSchema, {
      name: info.name,
      type:
        info.type === 'dir' ? FileType.DIRECTORY : info.type === 'symlink' ? FileType.SYMLINK : FileType.FILE,
      path: info.path,
      size: BigInt(info.size),
      mode: info.mode,
      permissions: info.permissions,
      owner: users.get(info.uid) ?? String(info.uid),
      group: groups.get(info.gid) ?? String(info.gid),
      modifiedTime: timestampFromDate(info.modifiedTime),
      ...(info.symlinkTarget !== undefined ? { symlinkTarget: info.symlinkTarget } : {}),
    });
  }

  /** Forgets a removed box. */
  forget(boxId: string): void {
    this.#cache.delete(boxId);
  }
}

function requestOf(context: HandlerContext): EnvdRequest {
  const request = context.values.get(envdKey);
  if (!request) throw new ConnectError('no sandbox routed', Code.Internal);
  return request;
}

function pathOf(path: string, request: EnvdRequest, field = 'path'): string {
  if (path.includes('\0')) throw new ConnectError(`${field}: must not contain NUL`, Code.InvalidArgument);
  return resolvePath(path, request.user);
}

async function call<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw connectErrorOf(error);
  }
}

/** A polled watcher (`CreateWatcher`). */
interface Watcher {
  boxId: string;
  handle: WatchHandle;
  events: FilesystemEvent[];
}

/** The `filesystem.Filesystem` implementation. */
export function filesystemService(names: OwnerNames): ServiceImpl<typeof Filesystem> {
  const watchers = new Map<string, Watcher>();
  const eventOf = async (
    box: JsBox,
    base: string,
    e: BoxEvent,
    withEntry: boolean,
  ): Promise<FilesystemEvent> => {
    let entry: EntryInfo | undefined;
    if (withEntry && e.type !== 'remove' && e.type !== 'rename') {
      const info = await box.files.stat(`${base.replace(/\/$/, '')}/${e.name}`).catch(() => null);
      if (info) entry = await names.entry(box, info);
    }
    return create(FilesystemEventSchema, {
      name: e.name,
      type: EVENT_TYPE[e.type],
      ...(entry ? { entry } : {}),
    });
  };
  return {
    async stat(req, context) {
      const request = requestOf(context);
      const info = await call(() => request.box.files.stat(pathOf(req.path, request)));
      return { entry: await names.entry(request.box, info) };
    },
    async listDir(req, context) {
      const request = requestOf(context);
      const depth = req.depth === 0 ? 1 : req.depth;
      if (depth > MAX_LIST_DEPTH)
        throw new ConnectError(`depth: at most ${MAX_LIST_DEPTH}`, Code.InvalidArgument);
      const path = pathOf(req.path, request);
      const dir = await call(() => request.box.files.stat(path));
      if (dir.type !== 'dir') throw new ConnectError(`path ${path} is not a directory`, Code.InvalidArgument);
      const entries = await call(() => request.box.files.list(path, { depth }));
      return { entries: await Promise.all(entries.map((e) => names.entry(request.box, e))) };
    },
    async makeDir(req, context) {
      const request = requestOf(context);
      const path = pathOf(req.path, request);
      const made = await call(() => request.box.files.makeDir(path));
      if (!made) throw new ConnectError(`directory ${path} already exists`, Code.AlreadyExists);
      await chown(request, path);
      return { entry: await names.entry(request.box, await call(() => request.box.files.stat(path))) };
    },
    async move(req, context) {
      const request = requestOf(context);
      const moved = await call(() =>
        request.box.files.rename(
          pathOf(req.source, request, 'source'),
          pathOf(req.destination, request, 'destination'),
        ),
      );
      return { entry: await names.entry(request.box, moved) };
    },
    async remove(req, context) {
      const request = requestOf(context);
      await call(() => request.box.files.remove(pathOf(req.path, request)));
      return {};
    },
    async *watchDir(req, context) {
      const request = requestOf(context);
      const path = pathOf(req.path, request);
      const queue = new StreamQueue<WatchDirResponse>();
      const handle = await call(() =>
        request.box.files.watchDir(
          path,
          (e) => {
            eventOf(request.box, path, e, req.includeEntry).then(
              (event) =>
                queue.push(
                  create(WatchDirResponseSchema, { event: { case: 'filesystem', value: event } }),
                  256,
                ),
              () => {},
            );
          },
          { recursive: req.recursive, onExit: () => queue.close() },
        ),
      );
      try {
        yield create(WatchDirResponseSchema, { event: { case: 'start', value: {} } });
        const keepalive = () => create(WatchDirResponseSchema, { event: { case: 'keepalive', value: {} } });
        const interval = keepaliveMsOf(context.requestHeader.get('keepalive-ping-interval'));
        yield* queue.drain(context.signal, interval, keepalive, (e) =>
          e.event.case === 'filesystem' ? 256 : 0,
        );
      } finally {
        await handle.stop().catch(() => {});
      }
    },
    async createWatcher(req, context) {
      const request = requestOf(context);
      if (watchers.size >= MAX_WATCHERS)
        throw new ConnectError(`at most ${MAX_WATCHERS} watchers`, Code.ResourceExhausted);
      const path = pathOf(req.path, request);
      const id = randomUUID();
      const events: FilesystemEvent[] = [];
      const handle = await call(() =>
        request.box.files.watchDir(
          path,
          (e) => {
            eventOf(request.box, path, e, req.includeEntry).then(
              (event) => {
                events.push(event);
                if (events.length > MAX_WATCHER_EVENTS) events.shift();
              },
              () => {},
            );
          },
          { recursive: req.recursive, onExit: () => watchers.delete(id) },
        ),
      );
      watchers.set(id, { boxId: request.box.id, handle, events });
      return { watcherId: id };
    },
    async getWatcherEvents(req, context) {
      const watcher = watchers.get(req.watcherId);
      if (!watcher || watcher.boxId !== requestOf(context).box.id) {
        throw new ConnectError(`watcher ${req.watcherId} not found`, Code.NotFound);
      }
      return { events: watcher.events.splice(0) };
    },
    async removeWatcher(req, context) {
      const watcher = watchers.get(req.watcherId);
      if (!watcher || watcher.boxId !== requestOf(context).box.id) {
        throw new ConnectError(`watcher ${req.watcherId} not found`, Code.NotFound);
      }
      watchers.delete(req.watcherId);
      await watcher.handle.stop();
      return {};
    },
  };
}

/**
 * Gives `path` to the request's user (E2B creates files and directories as the user acting), unless
 * the user is root.
 */
export async function chown(request: EnvdRequest, path: string): Promise<void> {
  if (request.user === 'root') return;
  const execution = await request.box.execWith('chown', [`${request.user}:`, '--', path], undefined, {
    user: 'root',
  });
  await execution.wait();
}
