/**
 * The REST files backend: `box.files` of a REST box over the routes of `files-routes.ts`. File contents
 * are streamed both ways (request body sent chunked as it is read; response body read as it arrives).
 */
import { fstatSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { type ChunkSink, type HostFileSource, isHostFile, pumpFd } from '../runtime/files/pump.ts';
import type {
  FilesBackend,
  FilesystemEvent,
  JsEntryInfo,
  JsWriteInfo,
  WatchHandle,
  WatchRequest,
} from '../runtime/files/types.ts';
import type { Connection } from './client.ts';

type WireEntry = Omit<JsEntryInfo, 'modifiedTime'> & { modifiedTime: string };

function entry(wire: WireEntry): JsEntryInfo {
  return { ...wire, modifiedTime: new Date(wire.modifiedTime) };
}

function q(params: Record<string, string | number | boolean | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value));
  return `?${search}`;
}

/** Files of one REST box. */
export class RestFiles implements FilesBackend {
  readonly #conn: Connection;
  readonly #base: string;

  /** @param base the box's path on the server, `/v1/boxes/<id>`. */
  constructor(conn: Connection, base: string) {
    this.#conn = conn;
    this.#base = `${base}/files`;
  }

  readStream(path: string): Promise<Readable> {
    return this.#conn.raw(`${this.#base}/content${q({ path })}`);
  }

  readInto(path: string, sink: ChunkSink): Promise<void> {
    return this.#conn.download(`${this.#base}/content${q({ path })}`, sink);
  }

  async writeStream(path: string, source: Readable | HostFileSource, mode?: number): Promise<JsWriteInfo> {
    const url = `${this.#base}/content${q({ path, mode })}`;
    if (isHostFile(source)) {
      const { hostFd } = source;
      const length = fstatSync(hostFd).size;
      return this.#conn.upload<JsWriteInfo>('PUT', url, (sink) => pumpFd(hostFd, sink, length), length);
    }
    return this.#conn.upload<JsWriteInfo>('PUT', url, source);
  }

  async list(path: string, depth: number): Promise<JsEntryInfo[]> {
    return (await this.#conn.call<WireEntry[]>('GET', `${this.#base}${q({ path, depth })}`)).map(entry);
  }

  async stat(path: string): Promise<JsEntryInfo> {
    return entry(await this.#conn.call<WireEntry>('GET', `${this.#base}/stat${q({ path })}`));
  }

  async makeDir(path: string): Promise<boolean> {
    return (await this.#conn.call<{ created: boolean }>('POST', `${this.#base}/mkdir`, { path })).created;
  }

  async remove(path: string): Promise<void> {
    await this.#conn.call('DELETE', `${this.#base}${q({ path })}`);
  }

  async rename(from: string, to: string): Promise<JsEntryInfo> {
    return entry(await this.#conn.call<WireEntry>('POST', `${this.#base}/rename`, { from, to }));
  }

  async symlink(path: string, target: string): Promise<void> {
    await this.#conn.call('POST', `${this.#base}/symlink`, { path, target });
  }

  async watch({ path, recursive, onEvent, onExit }: WatchRequest): Promise<WatchHandle> {
    const lines = await this.#conn.raw(`${this.#base}/watch${q({ path, recursive })}`);
    lines.setEncoding('utf8'); // a character split across two chunks is decoded whole
    let stopped = false;
    let ready!: () => void;
    const isReady = new Promise<void>((resolve) => {
      ready = resolve;
    });
    (async () => {
      let buffered = '';
      try {
        for await (const chunk of lines) {
          buffered += chunk;
          let nl = buffered.indexOf('\n');
          while (nl >= 0) {
            const line = buffered.slice(0, nl);
            buffered = buffered.slice(nl + 1);
            nl = buffered.indexOf('\n');
            const message = JSON.parse(line) as FilesystemEvent | { type: 'ready' };
            if (message.type === 'ready') ready();
            else onEvent(message as FilesystemEvent);
          }
        }
        ready();
        if (!stopped) onExit();
      } catch (error) {
        ready();
        if (!stopped) onExit(error as Error);
      }
    })();
    await isReady;
    return {
      stop: async () => {
        stopped = true;
        lines.destroy();
      },
    };
  }
}
