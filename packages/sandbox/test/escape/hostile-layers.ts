/**
 * Test helper: hostile layer content aimed at a host canary tree, and the oracle that the tree did not
 * change. `makeCanary` makes the tree, `canaryFacts` records everything an escape could change in it
 * (type, mode with setuid bits, owner, size, mtime, content hash, link target, device number, extended
 * attributes), `HOSTILE_CASES` are the hand-written classes of hostile layers, `hostileLayer` is the
 * fast-check arbitrary that generates orderings of the same entry types and
 * `assertGeneratedLayersKeepCanary` runs an escape path on generated layers with the canary oracle.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import tar from 'tar-stream';
import { BoxError, ImageStore, type JsRuntime } from '../../src/index.ts';
// internal: writes hostile layer tars the way box exports do
import { writeLayerTar } from '../../src/runtime/archive-tar.ts';
import type { FixtureEntry } from '../helpers/registry.ts';
import { REGISTRIES } from '../runtime-helpers.ts';

/**
 * Creates `<parent>/canary`: `victim` (0644), `secret` (0600), `bin/tool` (0755), `d/` (0755) with `d/f`.
 * @returns its absolute path.
 */
export function makeCanary(parent: string): string {
  const dir = join(parent, 'canary');
  mkdirSync(join(dir, 'bin'), { recursive: true });
  mkdirSync(join(dir, 'd'));
  writeFileSync(join(dir, 'victim'), 'victim\n', { mode: 0o644 });
  writeFileSync(join(dir, 'secret'), 'secret\n', { mode: 0o600 });
  writeFileSync(join(dir, 'bin/tool'), '#!/bin/sh\n', { mode: 0o755 });
  writeFileSync(join(dir, 'd/f'), 'f\n');
  chmodSync(dir, 0o755);
  return dir;
}

/** Extended attributes of every file under `dir` (`getfattr`, all namespaces, symlinks not followed). */
function xattrs(dir: string): string {
  try {
    return execFileSync('getfattr', ['-R', '-h', '-d', '-m', '-', '--absolute-names', dir], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch (error) {
    return String((error as { stdout?: string }).stdout ?? '');
  }
}

/**
 * Everything an escape could change under `dir` (including `dir` itself), one line per file, sorted.
 */
export function canaryFacts(dir: string): string[] {
  const out: string[] = [];
  const walk = (path: string, rel: string) => {
    const st = lstatSync(path);
    const head = `${rel} ${st.mode.toString(8)} ${st.uid}:${st.gid} ${st.size} ${st.mtimeMs} ${st.rdev}`;
    if (st.isSymbolicLink()) out.push(`${head} -> ${readlinkSync(path)}`);
    else if (st.isFile())
      out.push(`${head} ${createHash('sha256').update(readFileSync(path)).digest('hex')}`);
    else out.push(head);
    if (st.isDirectory())
      for (const name of readdirSync(path).sort()) walk(join(path, name), `${rel}/${name}`);
  };
  walk(dir, '.');
  out.push(xattrs(dir));
  return out;
}

/** A hand-written hostile layer: its entries (aimed at `canary`) and what must come of it. */
export interface HostileCase {
  name: string;
  entries: (canary: string) => FixtureEntry[];
  /** `refused`: the unpack fails with code `image`; `confined`: it succeeds inside the target. */
  expect: 'refused' | 'confined' | 'either';
}

const up = '../'.repeat(12);

/** Every class of hostile layer: swaps before and after deferred work, links, names, devices, the root. */
export const HOSTILE_CASES: HostileCase[] = [
  {
    name: 'directory mode then swapped for a symlink to the host',
    entries: (c) => [
      { name: 'd/', type: 'directory', mode: 0o777 },
      { name: 'd', type: 'symlink', linkname: c },
    ],
    expect: 'confined',
  },
  {
    name: 'setuid directory mode then swapped for a symlink to a host file',
    entries: (c) => [
      { name: 'd/', type: 'directory', mode: 0o4777 },
      { name: 'd', type: 'symlink', linkname: `${c}/victim` },
    ],
    expect: 'confined',
  },
  {
    name: 'whiteout then its directory swapped for a symlink',
    entries: (c) => [
      { name: 'd/', type: 'directory' },
      { name: 'd/.wh.victim' },
      { name: 'd', type: 'symlink', linkname: c },
    ],
    expect: 'confined',
  },
  {
    name: 'whiteout then a relative symlink swap',
    entries: () => [
      { name: 'd/', type: 'directory', mode: 0o777 },
      { name: 'd/.wh.victim' },
      { name: 'd', type: 'symlink', linkname: '../canary' },
    ],
    expect: 'confined',
  },
  {
    name: 'opaque marker then its directory swapped for a symlink',
    entries: (c) => [
      { name: 'd/', type: 'directory' },
      { name: 'd/.wh..wh..opq' },
      { name: 'd', type: 'symlink', linkname: c },
    ],
    expect: 'confined',
  },
  {
    name: 'nested directory swapped through its parent',
    entries: (c) => [
      { name: 'a/', type: 'directory' },
      { name: 'a/b/', type: 'directory', mode: 0o777 },
      { name: 'a/b/.wh.secret' },
      { name: 'a', type: 'symlink', linkname: c },
      { name: 'b', type: 'symlink', linkname: `${c}/d` },
    ],
    expect: 'confined',
  },
  {
    name: 'symlink then a whiteout through it',
    entries: (c) => [{ name: 'd', type: 'symlink', linkname: c }, { name: 'd/.wh.victim' }],
    expect: 'refused',
  },
  {
    name: 'symlink then an opaque marker through it',
    entries: (c) => [{ name: 'd', type: 'symlink', linkname: c }, { name: 'd/.wh..wh..opq' }],
    expect: 'refused',
  },
  {
    name: 'symlink then a directory entry of the same name',
    entries: (c) => [
      { name: 'd', type: 'symlink', linkname: c },
      { name: 'd/', type: 'directory', mode: 0o777 },
    ],
    expect: 'confined',
  },
  {
    name: 'symlink then a file written through it',
    entries: (c) => [
      { name: 'd', type: 'symlink', linkname: c },
      { name: 'd/victim', content: 'pwned' },
    ],
    expect: 'refused',
  },
  {
    name: 'symlink to a host file then a file of the same name',
    entries: (c) => [
      { name: 'victim', type: 'symlink', linkname: `${c}/victim` },
      { name: 'victim', content: 'pwned', mode: 0o4777 },
    ],
    expect: 'confined',
  },
  {
    name: 'hard link to an absolute host path',
    entries: (c) => [{ name: 'h', type: 'link', linkname: `${c}/victim` }],
    expect: 'refused',
  },
  {
    name: 'hard link climbing out',
    entries: () => [{ name: 'h', type: 'link', linkname: `${up}canary/victim` }],
    expect: 'refused',
  },
  {
    name: 'hard link through a symlink the layer planted',
    entries: (c) => [
      { name: 's', type: 'symlink', linkname: c },
      { name: 'h', type: 'link', linkname: 's/victim' },
    ],
    expect: 'refused',
  },
  {
    name: 'name climbing out with ..',
    entries: () => [{ name: `${up}canary/victim`, content: 'pwned' }],
    expect: 'refused',
  },
  {
    name: 'name climbing out from inside a directory',
    entries: () => [
      { name: 'a/', type: 'directory' },
      { name: `a/${up}canary/new`, content: 'pwned' },
    ],
    expect: 'refused',
  },
  {
    name: 'absolute name',
    entries: (c) => [{ name: `${c}/victim`, content: 'pwned' }],
    expect: 'confined',
  },
  {
    name: 'the root itself as a symlink (umoci CVE-2021-29136), then a file through it',
    entries: (c) => [
      { name: '.', type: 'symlink', linkname: c },
      { name: '/', type: 'symlink', linkname: c },
      { name: 'victim', content: 'pwned' },
    ],
    expect: 'confined',
  },
  {
    name: 'whiteout named ..',
    entries: () => [{ name: 'd/.wh...' }],
    expect: 'refused',
  },
  {
    name: 'device nodes and FIFOs',
    entries: () => [
      { name: 'mem', type: 'character-device', mode: 0o666 },
      { name: 'fifo', type: 'fifo' },
    ],
    expect: 'confined',
  },
  {
    name: 'GNU sparse entry',
    entries: () => [{ name: 'sparse', content: 'x'.repeat(1000), sparse: true }],
    expect: 'either',
  },
];

/**
 * fast-check arbitrary: a layer of 1–12 entries over a few names, of every entry type (GNU sparse
 * included), aimed at `canary`.
 */
export function hostileLayer(canary: string): fc.Arbitrary<HostileEntries> {
  const name = fc.constantFrom(
    'd',
    'a',
    'd/a',
    'a/d',
    'd/victim',
    'a/b/c',
    'victim',
    `${up}canary`,
    canary.slice(1),
  );
  const target = fc.constantFrom(
    canary,
    `${canary}/victim`,
    `${canary}/d`,
    '../canary',
    '../../canary/d',
    '/',
    'd',
    'a/d',
    '.',
  );
  const mode = fc.constantFrom(0o777, 0o4777, 0o2755, 0o000, 0o755, 0o644);
  const entry: fc.Arbitrary<FixtureEntry & { sparse?: boolean }> = fc.oneof(
    fc.record({ name: name.map((n) => `${n}/`), type: fc.constant('directory' as const), mode }),
    fc.record({ name, content: fc.constant('pwned'), mode }),
    fc.record({ name, type: fc.constant('symlink' as const), linkname: target }),
    fc.record({ name, type: fc.constant('link' as const), linkname: fc.oneof(name, target) }),
    fc.record({ name: name.map((n) => `${n}/.wh.victim`) }),
    fc.record({ name: name.map((n) => `${n}/.wh.d`) }),
    fc.record({ name: name.map((n) => `${n}/.wh..wh..opq`) }),
    fc.record({ name, type: fc.constantFrom('character-device' as const, 'fifo' as const) }),
    fc.record({ name, content: fc.constant('s'.repeat(700)), sparse: fc.constant(true) }),
  );
  return fc.array(entry, { minLength: 1, maxLength: 12 });
}

/** The entries of one generated hostile layer (see {@link hostileLayer}). */
export type HostileEntries = FixtureEntry[];

/**
 * The property every escape path must hold for generated layers (fast-check, seeded by `run.seed`,
 * `run.numRuns` layers): before each run, `arena` is made afresh with `<arena>/canary` (and an empty
 * directory for each name in `run.beside`); `attempt` gets the generated entries aimed at the canary and
 * answers the error it met (undefined when the layer was accepted). After each run: an error is a
 * `BoxError` with code `image`, the canary's facts ({@link canaryFacts}) are unchanged, and `arena`
 * holds nothing but the canary and `run.beside`. Rejects with fast-check's report of the first failing
 * run (the run stops there).
 */
export async function assertGeneratedLayersKeepCanary(
  arena: string,
  attempt: (entries: HostileEntries) => Promise<unknown>,
  run: { seed: number; numRuns: number; beside?: string[] },
): Promise<void> {
  const canary = join(arena, 'canary');
  const beside = run.beside ?? [];
  await fc.assert(
    fc.asyncProperty(hostileLayer(canary), async (entries) => {
      rmSync(arena, { recursive: true, force: true });
      for (const name of beside) mkdirSync(join(arena, name), { recursive: true });
      makeCanary(arena);
      const before = canaryFacts(canary);
      const error = await attempt(entries);
      if (error !== undefined && error !== null) {
        assert.ok(
          error instanceof BoxError && error.code === 'image',
          String((error as Error).stack ?? error),
        );
      }
      assert.deepEqual(canaryFacts(canary), before);
      assert.deepEqual(readdirSync(arena).sort(), ['canary', ...beside].sort());
    }),
    { seed: run.seed, numRuns: run.numRuns, endOnFailure: true },
  );
}

/**
 * One hand-written box-layer class through an import path: `attempt` imports a box whose layer holds
 * `c.entries(canary)` (and removes it) and answers the error it met. A `refused` class must fail with a
 * `BoxError` of code `image` and leave `runtime` with as many boxes as before; any other class must
 * import without error; either way the canary's facts ({@link canaryFacts}) are unchanged.
 */
export async function assertBoxLayerCaseKeepsCanary(
  c: HostileCase,
  canary: string,
  runtime: JsRuntime,
  attempt: (entries: HostileEntries) => Promise<unknown>,
): Promise<void> {
  const boxes = (await runtime.listInfo()).length;
  const before = canaryFacts(canary);
  const error = await attempt(c.entries(canary));
  if (c.expect === 'refused') {
    assert.ok(error instanceof BoxError && error.code === 'image', String(error));
    assert.equal((await runtime.listInfo()).length, boxes, 'no box is left');
  } else assert.equal(error, undefined, String(error));
  assert.deepEqual(canaryFacts(canary), before);
}

/** sha256 digest of `data`. */
function sha256(data: Buffer): string {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

/**
 * Writes a box archive (the format of `runtime/archive.ts`) made by hand: `imageLayers` and `boxLayer` are
 * raw layer tars (hostile ones allowed), `options` the box options label as the archive carries it.
 */
export async function handMadeArchive(
  path: string,
  parts: { imageLayers: Buffer[]; boxLayer: Buffer; options: Record<string, unknown> },
): Promise<void> {
  const LAYER = 'application/vnd.oci.image.layer.v1.tar';
  const blobs = new Map<string, Buffer>();
  const put = (data: Buffer) => {
    const digest = sha256(data);
    blobs.set(digest, data);
    return { digest, size: data.length };
  };
  const layers = parts.imageLayers.map((l) => ({ mediaType: LAYER, ...put(l) }));
  const box = { mediaType: LAYER, ...put(parts.boxLayer), annotations: { 'org.seed.sandbox.layer': 'box' } };
  const all = [...layers, box];
  const labels = {
    'org.seed.sandbox.options': JSON.stringify(parts.options),
    'org.seed.sandbox.image': 'hostile',
  };
  const config = Buffer.from(
    JSON.stringify({
      architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      os: 'linux',
      config: { Env: ['PATH=/bin:/usr/bin'], Cmd: ['sleep', '3600'], Labels: labels },
      rootfs: { type: 'layers', diff_ids: all.map((l) => l.digest) },
    }),
  );
  const configDesc = { mediaType: 'application/vnd.oci.image.config.v1+json', ...put(config) };
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: configDesc,
      layers: all,
      annotations: labels,
    }),
  );
  const manifestDesc = { mediaType: 'application/vnd.oci.image.manifest.v1+json', ...put(manifest) };
  const pack = tar.pack();
  const entry = (name: string, data: Buffer) => pack.entry({ name, mode: 0o644, mtime: new Date(0) }, data);
  entry('oci-layout', Buffer.from('{"imageLayoutVersion":"1.0.0"}'));
  entry('index.json', Buffer.from(JSON.stringify({ schemaVersion: 2, manifests: [manifestDesc] })));
  for (const [digest, data] of blobs) entry(`blobs/sha256/${digest.slice(7)}`, data);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  writeFileSync(path, Buffer.concat(chunks));
}

/**
 * The layers of the image `reference` pulled into a fresh store under `home`, each as a raw tar (the
 * image part of a hand-made archive).
 */
export async function imageLayerTars(home: string, reference: string): Promise<Buffer[]> {
  const image = await new ImageStore({ homeDir: home, registries: REGISTRIES }).pull(reference);
  const tars: Buffer[] = [];
  for (const dir of image.layerDirs) {
    const out = new PassThrough();
    const chunks: Buffer[] = [];
    out.on('data', (c: Buffer) => chunks.push(c));
    await writeLayerTar(dir, out, null);
    tars.push(Buffer.concat(chunks));
  }
  return tars;
}

/**
 * The hostile classes a box layer of an archive is tried with (swaps, writes and hard links through
 * planted symlinks, names climbing out): the ones that aim at the host through the box's own tree.
 */
export const BOX_LAYER_CASES: HostileCase[] = HOSTILE_CASES.filter((c) =>
  /swapped|through it|written through|hard link through|climbing/.test(c.name),
);
