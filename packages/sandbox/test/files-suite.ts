/**
 * One files suite, two runtimes: `box.files` (read/write in every form, list, stat, exists, makeDir,
 * remove, rename, watchDir), `copyIn`/`copyOut` with BoxLite's options, confinement of every path to the
 * box root (symlinks planted by the box never reach host files), and the error codes — asserted the same
 * way on the local and the REST runtime.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { BoxError, type FilesystemEvent, type JsBox, type JsRuntime, SimpleBox } from '../src/index.ts';
import { BUSYBOX, run } from './runtime-helpers.ts';

/** A runtime under test. */
export interface FilesTarget {
  /** `gvisor`: a local runtime whose boxes run on the gVisor tier. */
  kind: 'local' | 'rest' | 'gvisor';
  runtime: JsRuntime;
}

async function rejectsCode(promise: Promise<unknown>, code: string, field?: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof BoxError, `expected a BoxError, got ${error}`);
    assert.equal(error.code, code, error.message);
    if (field !== undefined) assert.equal(error.field, field);
    return true;
  });
}

/**
 * Polls `check` every 25 ms for up to 15 s (a gVisor box's watch lists the directory every 250 ms, slowly
 * on a loaded machine).
 */
async function until(check: () => boolean, what: string): Promise<void> {
  for (const end = Date.now() + 15_000; Date.now() < end; ) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  assert.fail(`timed out waiting for ${what}`);
}

/** Registers the files suite; boxes are named with `prefix` and removed at the end. */
export function filesSuite(title: string, prefix: string, setup: () => Promise<FilesTarget>): void {
  describe(title, () => {
    let runtime: JsRuntime;
    let box: JsBox;
    let hostDir: string;

    let kind: FilesTarget['kind'];

    before(async () => {
      ({ runtime, kind } = await setup());
      box = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } }, `${prefix}-files`);
      hostDir = mkdtempSync('/tmp/sandbox-files-host-');
    });

    after(async () => {
      await runtime.remove(`${prefix}-files`, true).catch(() => {});
      rmSync(hostDir, { recursive: true, force: true });
    });

    it('write and read text, bytes and streams; parents are created; the box sees the bytes', async () => {
      const info = await box.files.write('/data/deep/a.txt', 'héllo\n');
      assert.deepEqual(info, { name: 'a.txt', path: '/data/deep/a.txt', type: 'file' });
      assert.equal(await box.files.read('/data/deep/a.txt'), 'héllo\n');
      assert.equal((await run(box, 'cat', ['/data/deep/a.txt'])).stdout, 'héllo');
      const bytes = randomBytes(300_000);
      await box.files.write('/data/b.bin', bytes);
      const back = await box.files.read('/data/b.bin', { format: 'bytes' });
      assert.ok(back instanceof Uint8Array);
      assert.ok(Buffer.from(back).equals(bytes));
      // Streams both ways: a Node stream in, a web stream out.
      await box.files.write('/data/c.bin', Readable.from([bytes.subarray(0, 1000), bytes.subarray(1000)]));
      const stream = await box.files.read('/data/c.bin', { format: 'stream' });
      const chunks: Uint8Array[] = [];
      for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) chunks.push(chunk);
      assert.ok(Buffer.concat(chunks).equals(bytes));
      // Blob and ArrayBuffer; an empty file.
      await box.files.write('/data/blob.txt', new Blob(['from a blob']));
      assert.equal(await box.files.read('/data/blob.txt'), 'from a blob');
      await box.files.write('/data/empty', new ArrayBuffer(0));
      assert.equal(await box.files.read('/data/empty'), '');
    });

    it('overwrite keeps mode and owner; new files get the given mode; written as the box user', async () => {
      await run(box, 'sh', [
        '-c',
        'echo old > /data/kept && chmod 640 /data/kept && chown 65534:65534 /data/kept',
      ]);
      await box.files.write('/data/kept', 'new');
      const st = await box.files.stat('/data/kept');
      assert.deepEqual([st.mode, st.uid, st.gid, st.size], [0o640, 65534, 65534, 3]);
      await box.files.write('/data/script.sh', '#!/bin/sh\necho ran\n', { mode: 0o755 });
      assert.equal((await box.files.stat('/data/script.sh')).permissions, 'rwxr-xr-x');
      assert.equal((await run(box, '/data/script.sh')).stdout, 'ran');
      assert.equal((await run(box, 'stat', ['-c', '%u:%g', '/data/deep'])).stdout, '0:0');
    });

    it('list with depth, stat, exists, makeDir, rename, remove', async () => {
      await box.files.makeDir('/tree/a/b');
      assert.equal(await box.files.makeDir('/tree/a/b'), false);
      await box.files.write('/tree/a/one', '1');
      await box.files.write('/tree/a/b/two', '22');
      await run(box, 'ln', ['-s', 'a/one', '/tree/link']);
      const top = await box.files.list('/tree');
      assert.deepEqual(
        top.map((e) => [e.name, e.type]),
        [
          ['a', 'dir'],
          ['link', 'symlink'],
        ],
      );
      assert.equal(top[1]?.symlinkTarget, 'a/one');
      const all = await box.files.list('/tree', { depth: 3 });
      assert.deepEqual(
        all.map((e) => e.path),
        ['/tree/a', '/tree/a/b', '/tree/a/b/two', '/tree/a/one', '/tree/link'],
      );
      const two = all.find((e) => e.name === 'two')!;
      assert.equal(two.size, 2);
      assert.ok(
        two.modifiedTime instanceof Date && Math.abs(two.modifiedTime.getTime() - Date.now()) < 600_000,
      );
      assert.equal(await box.files.read('/tree/link'), '1', 'a relative symlink is followed inside the box');
      assert.equal(await box.files.exists('/tree/a/one'), true);
      assert.equal(await box.files.exists('/tree/nothing'), false);
      const moved = await box.files.rename('/tree/a/one', '/tree/moved');
      assert.equal(moved.path, '/tree/moved');
      assert.equal(await box.files.exists('/tree/a/one'), false);
      await box.files.remove('/tree/a');
      assert.equal(await box.files.exists('/tree/a'), false);
      assert.equal((await run(box, 'ls', ['/tree'])).stdout, 'link\nmoved');
    });

    it('confinement: symlinks the box plants resolve inside the box, never to host files', async () => {
      const marker = `host-marker-${randomBytes(6).toString('hex')}`;
      writeFileSync(join('/tmp', marker), 'HOST SECRET');
      try {
        await run(box, 'sh', [
          '-c',
          // runsc 20221219's Sentry shows every name below a symlink to exactly `/` as an empty
          // directory, to the box's own commands too; `/.` is the same root without that bug.
          `mkdir -p /esc && ln -sf ${kind === 'gvisor' ? '/.' : '/'} /esc/root && ln -sf ../../../../../../tmp /esc/up && ln -sf /tmp/${marker} /esc/abs`,
        ]);
        // The host file exists at /tmp/<marker>; through every link the box's own /tmp is reached instead.
        await rejectsCode(box.files.read(`/esc/root/tmp/${marker}`), 'not_found');
        await rejectsCode(box.files.read(`/esc/up/${marker}`), 'not_found');
        await rejectsCode(box.files.read('/esc/abs'), 'not_found');
        await rejectsCode(box.files.read(`/../../../../tmp/${marker}`), 'not_found');
        // Writing through them writes into the box, the host file is untouched.
        await box.files.write('/esc/abs', 'written in the box');
        await box.files.write(`/esc/up/${marker}-2`, 'x');
        assert.equal(readFileSync(join('/tmp', marker), 'utf8'), 'HOST SECRET');
        assert.equal(existsSync(join('/tmp', `${marker}-2`)), false);
        assert.equal((await run(box, 'cat', [`/tmp/${marker}`])).stdout, 'written in the box');
        // /etc/hostname through the root link is the box's.
        assert.equal((await box.files.read('/esc/root/etc/hostname')).trim(), `${prefix}-files`);
        // Removing a link to a directory removes the link, not what it points to.
        await box.files.remove('/esc/root');
        assert.equal((await run(box, 'test', ['-d', '/etc'])).exitCode, 0);
        await rejectsCode(box.files.list('/../..'), 'invalid_option', 'path');
      } finally {
        rmSync(join('/tmp', marker), { force: true });
      }
    });

    it('a source that fails mid-write leaves neither the file nor a temporary file', async () => {
      await box.files.makeDir('/partial');
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield new Uint8Array(100_000);
        throw new Error('source broke');
      }
      await assert.rejects(box.files.write('/partial/f.bin', failing()));
      assert.equal(await box.files.exists('/partial/f.bin'), false);
      // Over REST the client's rejection can arrive before the server has seen the aborted upload and
      // removed its temporary file: ask for up to 15 s.
      let names: string[] = [];
      for (const end = Date.now() + 15_000; Date.now() < end; ) {
        names = (await box.files.list('/partial')).map((e) => e.name);
        if (names.length === 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.deepEqual(names, []);
    });

    it('errors have stable codes and name the field', async () => {
      await rejectsCode(box.files.read('/no/such/file'), 'not_found');
      await rejectsCode(box.files.read('/etc'), 'conflict');
      await rejectsCode(box.files.read('relative/path'), 'invalid_option', 'path');
      await rejectsCode(box.files.write('/etc', 'x'), 'conflict');
      await rejectsCode(box.files.write('/x', 42 as never), 'invalid_option', 'data');
      await rejectsCode(box.files.list('/etc', { depth: 0 }), 'invalid_option', 'depth');
      await rejectsCode(box.files.list('/etc/passwd'), 'invalid_option', 'path');
      await rejectsCode(
        box.files.read('/etc/passwd', { format: 'xml' as never }),
        'invalid_option',
        'format',
      );
      await rejectsCode(box.files.remove('/no/such'), 'not_found');
      await rejectsCode(box.files.rename('/no/such', '/x'), 'not_found');
    });

    it('watchDir reports creates, writes and removes, recursively into new directories', async () => {
      await box.files.makeDir('/watched');
      const events: FilesystemEvent[] = [];
      const handle = await box.files.watchDir('/watched', (e) => events.push(e), { recursive: true });
      try {
        await box.files.write('/watched/f', 'x');
        await until(() => events.some((e) => e.name === 'f' && e.type === 'create'), 'create f');
        await run(box, 'sh', ['-c', 'echo more >> /watched/f']);
        await until(() => events.some((e) => e.name === 'f' && e.type === 'write'), 'write f');
        await box.files.makeDir('/watched/sub');
        await until(() => events.some((e) => e.name === 'sub' && e.type === 'create'), 'create sub');
        await run(box, 'touch', ['/watched/sub/inner']);
        await until(() => events.some((e) => e.name === 'sub/inner'), 'sub/inner');
        await box.files.remove('/watched/f');
        await until(() => events.some((e) => e.name === 'f' && e.type === 'remove'), 'remove f');
        assert.ok(
          !events.some((e) => e.name.includes('.seed-')),
          'the temporary file of write is not reported',
        );
      } finally {
        await handle.stop();
      }
      const seen = events.length;
      await box.files.write('/watched/after', 'x');
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.equal(events.length, seen, 'no events after stop()');
    });

    it('copyIn and copyOut: docker cp placement, includeParent, symlinks, overwrite', async () => {
      const src = join(hostDir, 'proj');
      mkdirSync(join(src, 'sub'), { recursive: true });
      writeFileSync(join(src, 'a.txt'), 'A');
      writeFileSync(join(src, 'sub', 'b.bin'), randomBytes(70_000));
      symlinkSync('a.txt', join(src, 'link'));
      // Destination missing: becomes the copy.
      await box.copyIn(src, '/app');
      assert.equal((await run(box, 'cat', ['/app/a.txt'])).stdout, 'A');
      assert.equal((await box.files.stat('/app/link')).symlinkTarget, 'a.txt');
      // Destination an existing directory: lands in it (includeParent, the default), or merges (false).
      await box.copyIn(src, '/app');
      assert.equal(await box.files.exists('/app/proj/sub/b.bin'), true);
      await box.files.makeDir('/flat');
      await box.copyIn(src, '/flat', { includeParent: false });
      assert.equal(await box.files.exists('/flat/a.txt'), true);
      // A file onto a directory lands in it; overwrite false refuses an existing file.
      await box.copyIn(join(src, 'a.txt'), '/flat/sub');
      assert.equal(await box.files.read('/flat/sub/a.txt'), 'A');
      await rejectsCode(box.copyIn(join(src, 'a.txt'), '/flat/a.txt', { overwrite: false }), 'conflict');
      await rejectsCode(box.copyIn(src, '/nodir', { recursive: false }), 'invalid_option', 'recursive');
      await rejectsCode(box.copyIn(join(hostDir, 'missing'), '/x'), 'not_found');
      await rejectsCode(box.copyIn(src, '/x', { colour: true } as never), 'invalid_option', 'colour');
      // Out again: same bytes, the link as a link (never followed on the host).
      const out = join(hostDir, 'out');
      await box.copyOut('/app', out); // includeParent into a new path: out/app/… (BoxLite)
      assert.ok(
        readFileSync(join(out, 'app', 'sub', 'b.bin')).equals(readFileSync(join(src, 'sub', 'b.bin'))),
      );
      assert.equal(readlinkSync(join(out, 'app', 'link')), 'a.txt');
      await box.copyOut('/app/a.txt', out); // onto a directory: out/a.txt, replaced
      await rejectsCode(box.copyOut('/app/a.txt', join(out, 'a.txt'), { overwrite: false }), 'conflict');
      // A box link to an absolute path is copied as a link; followSymlinks copies the box's content.
      await run(box, 'ln', ['-s', '/etc/hostname', '/app/hn']);
      await box.copyOut('/app/hn', join(hostDir, 'hn-link'));
      assert.ok(lstatSync(join(hostDir, 'hn-link')).isSymbolicLink());
      await box.copyOut('/app/hn', join(hostDir, 'hn-file'), { followSymlinks: true });
      assert.equal(readFileSync(join(hostDir, 'hn-file'), 'utf8').trim(), `${prefix}-files`);
      // An empty file both ways; a missing box file leaves no host file behind.
      writeFileSync(join(hostDir, 'empty'), '');
      await box.copyIn(join(hostDir, 'empty'), '/app/empty');
      assert.equal((await box.files.stat('/app/empty')).size, 0);
      await box.copyOut('/app/empty', join(hostDir, 'empty-back'));
      assert.equal(readFileSync(join(hostDir, 'empty-back')).length, 0);
      await rejectsCode(box.copyOut('/app/missing', join(hostDir, 'missing-back')), 'not_found');
      assert.equal(existsSync(join(hostDir, 'missing-back')), false);
    });

    it('copyIn and copyOut never follow a host symlink below the named path', async () => {
      const canary = join(hostDir, 'canary');
      mkdirSync(canary, { recursive: true });
      writeFileSync(join(canary, 'secret.txt'), 'host only');
      const src = join(hostDir, 'links');
      mkdirSync(join(src, 'real'), { recursive: true });
      writeFileSync(join(src, 'real', 'r.txt'), 'R');
      symlinkSync(canary, join(src, 'abs')); // absolute: copied as a link even with followSymlinks
      symlinkSync('../canary', join(src, 'up')); // climbs out: copied as a link
      symlinkSync('real/r.txt', join(src, 'rel')); // stays below the link's directory: followed
      await box.copyIn(src, '/links', { followSymlinks: true });
      assert.equal((await box.files.stat('/links/abs')).symlinkTarget, canary);
      assert.equal((await box.files.stat('/links/up')).symlinkTarget, '../canary');
      assert.equal((await box.files.stat('/links/rel')).type, 'file');
      assert.equal(await box.files.read('/links/rel'), 'R');
      assert.equal((await run(box, 'grep', ['-rl', 'host only', '/links'])).stdout, '');
      // Out: a host symlink where a directory or file of the copy goes is not written through.
      await box.files.write('/outsrc/sub/secret.txt', 'from the box');
      const out = join(hostDir, 'links-out');
      mkdirSync(out);
      symlinkSync(canary, join(out, 'sub'));
      await rejectsCode(box.copyOut('/outsrc', out, { includeParent: false }), 'conflict');
      symlinkSync(join(canary, 'secret.txt'), join(out, 'file'));
      await box.copyOut('/outsrc/sub/secret.txt', join(out, 'file'));
      assert.equal(readFileSync(join(canary, 'secret.txt'), 'utf8'), 'host only');
      assert.equal(lstatSync(join(out, 'file')).isFile(), true);
      assert.equal(readFileSync(join(out, 'file'), 'utf8'), 'from the box');
    });

    it('SimpleBox has the same files API and copyIn/copyOut, starting its box on first use', async () => {
      await using simple = new SimpleBox({ runtime, image: BUSYBOX, name: `${prefix}-files-simple` });
      await simple.files.write('/work/in.txt', 'via SimpleBox');
      assert.equal((await simple.exec('cat', '/work/in.txt')).stdout, 'via SimpleBox');
      assert.deepEqual(
        (await simple.files.list('/work')).map((e) => e.name),
        ['in.txt'],
      );
      await simple.copyOut('/work/in.txt', join(hostDir, 'simple-out.txt'));
      assert.equal(readFileSync(join(hostDir, 'simple-out.txt'), 'utf8'), 'via SimpleBox');
      await simple.copyIn(join(hostDir, 'simple-out.txt'), '/work/again.txt');
      assert.equal(await simple.files.read('/work/again.txt'), 'via SimpleBox');
    });

    it('a stopped box refuses file operations with conflict', async () => {
      const stopped = await runtime.create(
        { image: BUSYBOX, network: { mode: 'disabled' } },
        `${prefix}-files-stopped`,
      );
      try {
        await stopped.stop();
        await rejectsCode(stopped.files.read('/etc/hostname'), 'conflict');
      } finally {
        await runtime.remove(`${prefix}-files-stopped`, true).catch(() => {});
      }
    });
  });
}
