/**
 * The files backend of the gVisor tier. A gVisor box's files live behind its Sentry (its root is served
 * by the gofer and cached by the Sentry; `/tmp` and `/dev/shm` exist only in the Sentry), so the host
 * does not touch them: each operation runs the host's static busybox inside the box (`runsc exec` of
 * `/.sandbox/busybox` with `gvisor-script.ts`), as the box's default user. Paths are resolved by the
 * box's own kernel as the box sees them, permissions are the box's, and no host process opens a file
 * of the box: nothing is followed on the host and nothing runs as host uid 0 (the Sentry runs as the
 * sandbox range's `nobody`).
 *
 * `watch` polls: the box lists the directory every 250 ms and changes between two listings are
 * reported (`create`, `remove`, `write` for a changed size, mode or modification time); it is returned
 * once the first listing has arrived, so every change made after that is reported.
 */
import { randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import type { EngineProcess } from '../../engine/types.ts';
import { BoxError, codeOf, conflict, notFound } from '../../errors.ts';
import { MAX_LIST_ENTRIES } from './entries.ts';
import {
  checkEntryPath,
  type Done,
  fromHex,
  parseBatches,
  refusal,
  sortTree,
  under,
} from './gvisor-parse.ts';
import { GVISOR_FILES_SCRIPT } from './gvisor-script.ts';
import { type ChunkSink, type HostFileSource, isHostFile, pumpFd, streamSink } from './pump.ts';
import type { FilesBackend, JsEntryInfo, JsWriteInfo, WatchHandle, WatchRequest } from './types.ts';

/** Bytes of a listing's output read at most (about 300 bytes per entry at `MAX_LIST_ENTRIES`). */
const MAX_LISTING_BYTES = 48 * 1024 * 1024;
/** Bytes of stderr kept for an error message. */
const MAX_STDERR_BYTES = 16 * 1024;
/** Listings of a batch retried when an entry vanished between `find` and `stat`. */
const LIST_ATTEMPTS = 3;
/** Temporary names of `write` (not reported by `watch`: the rename into place is). */
const TEMP_NAME = /(^|\/)\..*\.seed-[0-9a-f]{12}$/;

/** How the backend reaches a running gVisor box. */
export interface GVisorFilesTarget {
  /**
   * Starts `/.sandbox/busybox` with `args` in the box as its default user, with `env` added to its
   * environment. @throws BoxError `conflict` when the box is not running.
   */
  exec(args: string[], env: string[]): Promise<EngineProcess>;
}

/** Reads `stream` to its end, keeping at most `max` bytes (`onOverflow` is called past that). */
async function collect(stream: Readable, max: number, onOverflow: () => void): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > max) {
      onOverflow();
      continue;
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Files of one gVisor box (see the module comment). */
export class GVisorFiles implements FilesBackend {
  readonly #target: GVisorFilesTarget;

  /** @param target starts the helper in the box per operation. */
  constructor(target: GVisorFilesTarget) {
    this.#target = target;
  }

  #start(args: string[]): Promise<EngineProcess> {
    return this.#target.exec(
      ['sh', '-c', GVISOR_FILES_SCRIPT, 'sh', ...args],
      [`SEED_FILES=${GVISOR_FILES_SCRIPT}`],
    );
  }

  /** Runs one operation to its end. @throws BoxError when its output passes `MAX_LISTING_BYTES`. */
  async #run(args: string[], stdin?: (p: EngineProcess) => Promise<void>): Promise<Done> {
    const proc = await this.#start(args);
    let overflow = false;
    const kill = () => {
      overflow = true;
      proc.kill().catch(() => {});
    };
    let fed: { error: unknown } | undefined;
    const feeding = (stdin ? stdin(proc) : Promise.resolve(proc.stdin.end())).catch((error: unknown) => {
      fed = { error };
    });
    const [stdout, stderr, code] = await Promise.all([
      collect(proc.stdout, MAX_LISTING_BYTES, kill),
      collect(proc.stderr, MAX_STDERR_BYTES, () => {}),
      proc.exited,
      feeding,
    ]);
    if (overflow) {
      throw new BoxError(
        `'${args[1]}' holds more than ${MAX_LIST_ENTRIES} entries; list with a smaller depth`,
        {
          field: 'depth',
        },
      );
    }
    // A refusal comes first (the helper may stop reading its stdin); else a source that failed.
    if (code === 0 && fed) throw fed.error;
    return { code, stdout, stderr: stderr.toString('utf8') };
  }

  /** Runs an operation whose output is a resolved directory line and batches; retried when it changed. */
  async #entries(path: string, args: string[]): Promise<{ dir: string; entries: JsEntryInfo[] }> {
    for (let attempt = 1; ; attempt++) {
      const done = await this.#run(args);
      const lines = done.stdout.toString('latin1').split('\n');
      const entries = done.code === 0 ? parseBatches(lines.slice(1)) : undefined;
      if (entries) {
        if (entries.length > MAX_LIST_ENTRIES) {
          throw new BoxError(
            `'${path}' holds more than ${MAX_LIST_ENTRIES} entries; list with a smaller depth`,
            {
              field: 'depth',
            },
          );
        }
        return { dir: fromHex(lines[0]).toString('utf8'), entries };
      }
      if (done.code !== 4 && done.code !== 0) throw refusal(path, done);
      if (attempt >= LIST_ATTEMPTS) throw conflict(`'${path}' changed while it was listed; list it again`);
    }
  }

  async readStream(path: string): Promise<Readable> {
    checkEntryPath(path);
    const proc = await this.#start(['read', path]);
    proc.stdin.end();
    const stderr = collect(proc.stderr, MAX_STDERR_BYTES, () => {});
    const reader = proc.stdout;
    const head = await new Promise<Buffer | null>((resolve) => {
      const onReadable = () => {
        const chunk = reader.read() as Buffer | null;
        if (chunk === null) return;
        reader.off('readable', onReadable);
        reader.off('end', onEnd);
        resolve(chunk);
      };
      const onEnd = () => {
        reader.off('readable', onReadable);
        resolve(null);
      };
      reader.on('readable', onReadable);
      reader.once('end', onEnd);
    });
    if (head === null || head[0] !== 0x4b /* K */) {
      const code = await proc.exited;
      throw refusal(path, { code, stderr: (await stderr).toString('utf8') });
    }
    const out = new PassThrough({ highWaterMark: 64 * 1024 });
    if (head.length > 1) out.write(head.subarray(1));
    let finished = false;
    reader.pipe(out, { end: false });
    Promise.all([new Promise((resolve) => reader.once('end', resolve)), proc.exited, stderr]).then(
      ([, code, err]) => {
        finished = true;
        if (code === 0) out.end();
        else out.destroy(refusal(path, { code, stderr: err.toString('utf8') }));
      },
    );
    out.once('close', () => {
      if (!finished) proc.kill().catch(() => {});
    });
    return out;
  }

  async readInto(path: string, sink: ChunkSink): Promise<void> {
    const stream = await this.readStream(path);
    for await (const chunk of stream) await sink(chunk as Buffer);
  }

  /**
   * Writes through the helper's `cat > <temporary file>` and a rename into place. The source is
   * copied chunk by chunk with back-pressure; when it fails, the helper is killed while its stdin is
   * still open (so `cat` never sees an end and nothing half-written is renamed into place), and the
   * temporary file is removed.
   */
  async writeStream(path: string, source: Readable | HostFileSource, mode?: number): Promise<JsWriteInfo> {
    checkEntryPath(path);
    const modeArg = mode === undefined ? '' : (mode & 0o7777).toString(8);
    const suffix = randomBytes(6).toString('hex');
    let sourceError: { error: unknown } | undefined;
    const done = await this.#run(['write', path, modeArg, suffix], async (proc) => {
      const sink = streamSink(proc.stdin);
      try {
        if (isHostFile(source)) await pumpFd(source.hostFd, sink);
        else
          for await (const chunk of source)
            await sink(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
      } catch (error) {
        if (proc.stdin.writableEnded || proc.stdin.destroyed) return; // the helper stopped reading: its refusal
        sourceError = { error };
        await proc.kill().catch(() => {});
        proc.stdin.destroy();
        return;
      }
      proc.stdin.end();
    });
    if (sourceError) {
      const dir = path.slice(0, path.lastIndexOf('/')) || '/';
      const name = path.slice(path.lastIndexOf('/') + 1);
      await this.#run(['rm', under(dir, `.${name}.seed-${suffix}`)]).catch(() => {});
      const { error } = sourceError;
      if (error instanceof BoxError) throw error;
      throw new BoxError(`file operation on '${path}' failed: ${(error as Error)?.message ?? error}`, {
        cause: error,
        code: codeOf(error),
      });
    }
    if (done.code !== 0) throw refusal(path, done);
    const written = fromHex(done.stdout.toString('latin1').split('\n')[0]).toString('utf8');
    return { name: written.slice(written.lastIndexOf('/') + 1), path: written, type: 'file' };
  }

  async list(path: string, depth: number): Promise<JsEntryInfo[]> {
    checkEntryPath(path);
    const { entries } = await this.#entries(path, ['list', path, String(depth)]);
    return sortTree(entries);
  }

  async stat(path: string): Promise<JsEntryInfo> {
    checkEntryPath(path);
    const { dir, entries } = await this.#entries(path, ['stat', path]);
    const entry = entries[0];
    if (!entry) throw notFound(`no such file or directory in the box: '${path}'`);
    return { ...entry, path: under(dir, entry.name) };
  }

  async makeDir(path: string): Promise<boolean> {
    checkEntryPath(path);
    const done = await this.#run(['mkdir', path]);
    if (done.code !== 0) throw refusal(path, done);
    return done.stdout.toString('utf8').startsWith('created');
  }

  async remove(path: string): Promise<void> {
    checkEntryPath(path);
    const done = await this.#run(['rm', path]);
    if (done.code !== 0) throw refusal(path, done);
  }

  async rename(from: string, to: string): Promise<JsEntryInfo> {
    checkEntryPath(from);
    checkEntryPath(to);
    const { dir, entries } = await this.#entries(from, ['mv', from, to]);
    const entry = entries[0];
    if (!entry) throw notFound(`no such file or directory in the box: '${to}'`);
    return { ...entry, path: under(dir, entry.name) };
  }

  async symlink(path: string, target: string): Promise<void> {
    checkEntryPath(path);
    const done = await this.#run(['ln', target, path]);
    if (done.code !== 0) throw refusal(path, done);
  }

  async watch({ path, recursive, onEvent, onExit }: WatchRequest): Promise<WatchHandle> {
    checkEntryPath(path);
    // The first listing checks the path (and its refusal comes back as the call's error).
    const { dir } = await this.#entries(path, ['list', path, '1']);
    const proc = await this.#start(['watch', path, recursive ? '64' : '1']);
    proc.stdin.end();
    let stopped = false;
    let last: Map<string, string> | undefined;
    let buffer = '';
    // The watch is returned once the box's first listing (the baseline later listings are compared with)
    // has arrived, so a change made right after `watchDir` resolves is reported; or once the poller ends.
    let baselineTaken!: () => void;
    const baseline = new Promise<void>((resolve) => {
      baselineTaken = resolve;
    });
    const prefix = dir === '/' ? '/' : `${dir}/`;
    const snapshot = (text: string) => {
      const entries = parseBatches(text.split('\n'));
      if (!entries) return; // an entry vanished mid-listing: the next one shows the change
      const now = new Map<string, string>();
      for (const e of entries) {
        const name = e.path.startsWith(prefix) ? e.path.slice(prefix.length) : e.name;
        if (!TEMP_NAME.test(name)) now.set(name, `${e.type} ${e.size} ${e.mode} ${e.modifiedTime.getTime()}`);
      }
      if (last && !stopped) {
        for (const [name, facts] of now) {
          const was = last.get(name);
          if (was === undefined) onEvent({ name, type: 'create' });
          else if (was !== facts) onEvent({ name, type: 'write' });
        }
        for (const name of last.keys()) if (!now.has(name)) onEvent({ name, type: 'remove' });
      }
      last = now;
      baselineTaken();
    };
    proc.stdout.setEncoding('latin1');
    proc.stdout.on('data', (chunk: string) => {
      buffer += chunk;
      for (;;) {
        const start = buffer.indexOf('@@S\n');
        const end = buffer.indexOf('@@E\n', start);
        if (start < 0 || end < 0) break;
        snapshot(buffer.slice(start + 4, end));
        buffer = buffer.slice(end + 4);
      }
      if (buffer.length > MAX_LISTING_BYTES) {
        stopped = true;
        proc.kill().catch(() => {});
        onExit(new BoxError(`'${path}' holds too many entries to watch`, { field: 'path' }));
      }
    });
    proc.stderr.resume();
    void proc.exited.then(baselineTaken, baselineTaken);
    proc.exited.then(
      (code) => {
        if (stopped) return;
        stopped = true;
        onExit(
          code === 0
            ? undefined
            : new BoxError(`the watch of '${path}' ended (exit ${code})`, { code: 'internal' }),
        );
      },
      (error: Error) => {
        if (!stopped) onExit(error);
        stopped = true;
      },
    );
    await baseline;
    return {
      stop: async () => {
        if (stopped) return;
        stopped = true;
        await proc.kill();
        await proc.exited.catch(() => {});
      },
    };
  }
}
