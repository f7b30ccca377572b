/**
 * Writes one overlay layer directory (a box's writable layer or an unpacked image layer) as an OCI layer
 * tar (image-spec layer.md "Changesets"), the reverse of `images/unpack.ts`: overlay whiteouts (character
 * devices 0:0) become `.wh.<name>` entries and opaque directories (`trusted.overlay.opaque=y`) get a
 * `.wh..wh..opq` entry. Hard links within the layer stay links; symlinks are stored, never followed;
 * device nodes and sockets are left out. Owners can be shifted (host ids of the box's user-namespace
 * range back to box ids), so the layer is portable. The tar itself is made by `tar-stream`.
 *
 * The directory must not change while it is read: callers pass a read-only btrfs snapshot or an image
 * layer of the store.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';

/** Maps host ids of a layer's files to the ids stored in the tar. */
export interface IdShift {
  /** Host uid of box uid 0, and the number of ids mapped; ids outside become 65534 (nobody). */
  hostUid: number;
  hostGid: number;
  size: number;
}

/** Counts of what a layer tar holds. */
export interface LayerTarStats {
  entries: number;
  bytes: number;
  whiteouts: number;
  opaqueDirs: number;
}

/** Files up to this size (bytes) are read whole; larger ones are streamed. */
const SMALL_FILE = 256 * 1024;

/** Directories under `root` with the overlay opaque xattr, relative (`getfattr -R`, attr package). */
function opaqueDirs(root: string): Promise<Set<string>> {
  return new Promise((resolve) => {
    execFile(
      'getfattr',
      ['-R', '-h', '--absolute-names', '-n', 'trusted.overlay.opaque', '--', root],
      { maxBuffer: 256 << 20 },
      (_err, stdout) => {
        // Exit status is 1 when some file lacks the attribute: the output is what counts.
        const out = new Set<string>();
        let file: string | null = null;
        for (const line of String(stdout).split('\n')) {
          if (line.startsWith('# file: ')) {
            file = line
              .slice(8)
              .replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(Number.parseInt(o, 8)));
          } else if (file && /^trusted\.overlay\.opaque="y"$/.test(line)) {
            if (file === root) out.add('');
            else if (file.startsWith(`${root}/`)) out.add(file.slice(root.length + 1));
          }
        }
        resolve(out);
      },
    );
  });
}

/**
 * Writes the layer in `root` as a tar to `out` (which is ended). Entries are sorted by name, so the
 * same tree gives the same bytes.
 */
export async function writeLayerTar(
  root: string,
  out: Writable,
  shift: IdShift | null,
): Promise<LayerTarStats> {
  const stats: LayerTarStats = { entries: 0, bytes: 0, whiteouts: 0, opaqueDirs: 0 };
  const opaque = await opaqueDirs(root);
  const pack = tar.pack();
  const done = pipeline(pack, out);
  const links = new Map<string, string>();
  const uidOf = (id: number) =>
    shift ? (id >= shift.hostUid && id < shift.hostUid + shift.size ? id - shift.hostUid : 65534) : id;
  const gidOf = (id: number) =>
    shift ? (id >= shift.hostGid && id < shift.hostGid + shift.size ? id - shift.hostGid : 65534) : id;
  const put = (header: Partial<tar.Header> & { name: string }): Promise<void> =>
    new Promise((resolve, reject) => {
      stats.entries++;
      pack.entry(header, '', (err) => (err ? reject(err) : resolve()));
    });
  const marker = (name: string, st: fs.Stats): Promise<void> =>
    put({ name, type: 'file', size: 0, mode: 0o644, uid: 0, gid: 0, mtime: st.mtime });

  const walk = async (rel: string): Promise<void> => {
    const abs = rel === '' ? root : join(root, rel);
    const names = fs.readdirSync(abs).sort();
    if (opaque.has(rel)) {
      stats.opaqueDirs++;
      await marker(rel === '' ? '.wh..wh..opq' : `${rel}/.wh..wh..opq`, fs.lstatSync(abs));
    }
    for (const name of names) {
      const childRel = rel === '' ? name : `${rel}/${name}`;
      const childAbs = join(abs, name);
      const st = fs.lstatSync(childAbs);
      const common = { mode: st.mode & 0o7777, uid: uidOf(st.uid), gid: gidOf(st.gid), mtime: st.mtime };
      if (st.isDirectory()) {
        await put({ ...common, name: `${childRel}/`, type: 'directory' });
        await walk(childRel);
      } else if (st.isSymbolicLink()) {
        await put({ ...common, name: childRel, type: 'symlink', linkname: fs.readlinkSync(childAbs) });
      } else if (st.isCharacterDevice() && st.rdev === 0) {
        stats.whiteouts++;
        await marker(rel === '' ? `.wh.${name}` : `${rel}/.wh.${name}`, st);
      } else if (st.isFIFO()) {
        await put({ ...common, name: childRel, type: 'fifo' });
      } else if (st.isFile()) {
        const key = `${st.dev}:${st.ino}`;
        const first = st.nlink > 1 ? links.get(key) : undefined;
        if (first !== undefined) {
          await put({ ...common, name: childRel, type: 'link', linkname: first });
          continue;
        }
        if (st.nlink > 1) links.set(key, childRel);
        const fd = fs.openSync(childAbs, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
        const header = { ...common, name: childRel, type: 'file' as const, size: st.size };
        stats.entries++;
        stats.bytes += st.size;
        if (st.size <= SMALL_FILE) {
          // Small files in one read: a stream per file costs more than the file.
          let data: Buffer;
          try {
            data = fs.readFileSync(fd);
          } finally {
            fs.closeSync(fd);
          }
          if (data.length !== st.size) throw new Error(`${childRel} changed while it was archived`);
          await new Promise<void>((resolve, reject) =>
            pack.entry(header, data, (err) => (err ? reject(err) : resolve())),
          );
          continue;
        }
        await new Promise<void>((resolve, reject) => {
          const entry = pack.entry(header, (err) => (err ? reject(err) : resolve()));
          fs.createReadStream('', { fd, autoClose: true }).on('error', reject).pipe(entry);
        });
      }
      // Device nodes and sockets are not carried (a box in a user namespace cannot make device nodes).
    }
  };
  await walk('');
  pack.finalize();
  await done;
  return stats;
}

/**
 * The tar stream `input` with every entry's owner moved from box ids to the host ids of `map` (box id
 * k → `hostUid + k`; ids beyond the range become the range's 65534, nobody).
 */
export function shiftTar(input: Readable, map: IdShift): Readable {
  const extract = tar.extract();
  const pack = tar.pack();
  const up = (id: number | undefined, base: number) =>
    base + (id !== undefined && id >= 0 && id < map.size ? id : 65534);
  extract.on('entry', (header, stream, next) => {
    const shifted = { ...header, uid: up(header.uid, map.hostUid), gid: up(header.gid, map.hostGid) };
    stream.pipe(pack.entry(shifted, next));
  });
  extract.on('finish', () => pack.finalize());
  extract.on('error', (e) => pack.destroy(e));
  input.on('error', (e) => pack.destroy(e));
  input.pipe(extract);
  return Readable.from(pack);
}
