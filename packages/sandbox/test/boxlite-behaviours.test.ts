/**
 * BoxLite behaviours at the edges of the SDK: `SimpleBox`'s constructor refuses the legacy option shapes
 * with a `TypeError` naming the field before anything is created, and `copyOut` with `includeParent`
 * lays a directory out as `<dest>/<name>` in a host path that does not exist yet. (`runtime.shutdown()`
 * refusing new boxes and pulls is in `lifecycle-suite.ts`, on both runtimes.)
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BoxError, type JsBox, type JsRuntime, SimpleBox } from '../src/index.ts';
import {
  BUSYBOX,
  boxDirs,
  cleanupAll,
  ensureRegistry,
  run,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

describe('SimpleBox constructor: legacy option shapes', () => {
  let home: string;
  let runtime: JsRuntime;

  before(() => {
    home = tempHome('sandbox-bl-ctor-');
    runtime = testRuntime(home);
  });

  after(() => rmSync(home, { recursive: true, force: true }));

  const typeErrorNaming = (field: string) => (e: unknown) => {
    assert.ok(e instanceof TypeError, `a TypeError, got ${String(e)}`);
    assert.equal((e as TypeError & { field: string }).field, field);
    assert.equal((e as TypeError & { code: string }).code, 'invalid_option');
    assert.match((e as Error).message, new RegExp(`\\b${field}\\b`));
    return true;
  };

  it("network: 'enabled' (a string) throws a TypeError naming network, before any box exists", () => {
    assert.throws(
      () => new SimpleBox({ runtime, image: BUSYBOX, network: 'enabled' } as never),
      typeErrorNaming('network'),
    );
    assert.throws(
      () => new SimpleBox({ runtime, image: BUSYBOX, network: 'disabled' } as never),
      typeErrorNaming('network'),
    );
    assert.deepEqual(boxDirs(home), []);
  });

  it('a top-level allowNet throws a TypeError naming allowNet', () => {
    assert.throws(
      () => new SimpleBox({ runtime, image: BUSYBOX, allowNet: ['example.com'] } as never),
      typeErrorNaming('allowNet'),
    );
    assert.deepEqual(boxDirs(home), []);
  });

  it('the object form is accepted by the constructor', () => {
    const box = new SimpleBox({ runtime, image: BUSYBOX, network: { mode: 'enabled', allowNet: ['a.b'] } });
    assert.equal(box.created, undefined);
  });
});

describe('copyOut with includeParent (local runtime)', () => {
  let runtime: JsRuntime;
  let box: JsBox;
  let hostDir: string;

  before(async () => {
    ensureRegistry();
    runtime = testRuntime(tempHome('sandbox-bl-copy-'));
    box = await runtime.create({ image: BUSYBOX, network: { mode: 'disabled' } });
    hostDir = mkdtempSync('/tmp/sandbox-bl-copy-');
    const made = await run(box, 'sh', [
      '-c',
      'mkdir -p /app/sub && echo a > /app/a.txt && echo b > /app/sub/b.txt',
    ]);
    assert.equal(made.exitCode, 0);
  });

  after(async () => {
    await runtime.remove(box.id, true).catch(() => {});
    rmSync(hostDir, { recursive: true, force: true });
    await cleanupAll();
  });

  it('into a destination that does not exist yet: <dest>/<name> with the whole tree', async () => {
    const dest = join(hostDir, 'fresh');
    await box.copyOut('/app', dest);
    assert.deepEqual(readdirSync(dest), ['app']);
    assert.deepEqual(readdirSync(join(dest, 'app')).sort(), ['a.txt', 'sub']);
    assert.equal(readFileSync(join(dest, 'app', 'sub', 'b.txt'), 'utf8'), 'b\n');
  });

  it('into an existing directory: <dest>/<name> as well', async () => {
    const dest = join(hostDir, 'existing');
    mkdirSync(dest);
    await box.copyOut('/app', dest, { includeParent: true });
    assert.deepEqual(readdirSync(dest), ['app']);
    assert.equal(readFileSync(join(dest, 'app', 'a.txt'), 'utf8'), 'a\n');
  });

  it('includeParent: false copies the contents to <dest> (existing or not)', async () => {
    const fresh = join(hostDir, 'contents-fresh');
    await box.copyOut('/app', fresh, { includeParent: false });
    assert.deepEqual(readdirSync(fresh).sort(), ['a.txt', 'sub']);
    const existing = join(hostDir, 'contents-existing');
    mkdirSync(existing);
    await box.copyOut('/app', existing, { includeParent: false });
    assert.deepEqual(readdirSync(existing).sort(), ['a.txt', 'sub']);
  });

  it('a single file into a path that does not exist yet becomes that file', async () => {
    const dest = join(hostDir, 'one.txt');
    await box.copyOut('/app/a.txt', dest);
    assert.equal(readFileSync(dest, 'utf8'), 'a\n');
  });

  it('a missing parent of the destination is refused, nothing made', async () => {
    const dest = join(hostDir, 'no', 'such', 'dir');
    await assert.rejects(box.copyOut('/app', dest), (e: unknown) => e instanceof BoxError);
    assert.deepEqual(
      readdirSync(hostDir).filter((n) => n === 'no'),
      [],
    );
  });
});
