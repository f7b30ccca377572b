/**
 * Warm pools (issue 18): `runtime.pool({ image, size, options })` keeps boxes ready, `create()` with the
 * same options hands one out (named as asked, lifetimes starting then) and the pool refills; pooled boxes
 * are not listed; `shutdown()` drains the pool; bad specs are refused naming the field.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BoxError, JsRuntime } from '../src/index.ts';
import {
  BUSYBOX,
  boxDirs,
  cleanupAll,
  ensureRegistry,
  run,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

const options = { network: { mode: 'disabled' as const }, memoryMib: 128 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('warm pools', () => {
  let home: string;
  let runtime: JsRuntime;

  before(() => {
    ensureRegistry();
    home = tempHome('sandbox-pool-');
    runtime = testRuntime(home);
  });

  after(async () => {
    await cleanupAll();
  });

  it('create() with the pool options hands out a ready box, named as asked; the pool refills', async () => {
    const pool = runtime.pool({ image: BUSYBOX, size: 2, options });
    await pool.filled();
    assert.equal(pool.ready(), 2);
    assert.equal((await runtime.listInfo()).length, 0, 'pooled boxes are not listed');
    const asked = Date.now();
    const box = await runtime.create({ image: BUSYBOX, ...options }, 'from-pool');
    const info = await box.info();
    assert.ok(Date.parse(info.createdAt) < asked, 'the box was created before create() was called');
    assert.equal(info.name, 'from-pool');
    assert.equal(info.state.status, 'running');
    assert.equal((await run(box, 'echo', ['warm'])).stdout, 'warm');
    assert.deepEqual(
      (await runtime.listInfo()).map((i) => i.name),
      ['from-pool'],
    );
    await pool.filled();
    assert.equal(pool.ready(), 2, 'refilled in the background');

    // Other options start a new box.
    const cold = await runtime.create({ image: BUSYBOX, ...options, memoryMib: 256 });
    assert.ok(Date.parse((await cold.info()).createdAt) >= asked);

    // A taken name is refused and the box stays in the pool.
    await assert.rejects(
      runtime.create({ image: BUSYBOX, ...options }, 'from-pool'),
      (e: unknown) => e instanceof BoxError && e.code === 'conflict' && e.field === 'name',
    );
    assert.equal(pool.ready(), 2);

    // Lifetimes start at hand-out.
    const timed = await runtime.create({ image: BUSYBOX, ...options, timeoutMs: 400, onTimeout: 'stop' });
    const t0 = Date.now();
    while ((await timed.info()).state.status !== 'stopped') {
      assert.ok(Date.now() - t0 < 15_000, 'stopped by its timeout');
      await sleep(50);
    }

    // shutdown() drains the pool: only the handed-out boxes stay on disk.
    await runtime.shutdown(0);
    assert.equal(pool.ready(), 0);
    const listed = (await runtime.listInfo()).map((i) => i.id).sort();
    assert.deepEqual(boxDirs(home).sort(), listed);
    await Promise.all(listed.map((id) => runtime.remove(id, true)));
  });

  it('bad pool specs are refused naming the field, by a REST runtime before any request', async () => {
    // Another runtime on the same home: the suite's was shut down by the test above (no new pools).
    const local = testRuntime(home);
    for (const [spec, field] of [
      [{ image: BUSYBOX, size: 0 }, 'size'],
      [{ image: '', size: 1 }, 'image'],
      [
        { image: BUSYBOX, size: 1, options: { secrets: [{ name: 'K', value: 'v', hosts: ['x.com'] }] } },
        'options.secrets',
      ],
      [{ image: BUSYBOX, size: 1, options: { cpus: -1 } }, 'cpus'],
    ] as const) {
      assert.throws(
        () => local.pool(spec as never),
        (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === field,
        field,
      );
    }
    // A REST runtime checks the spec before any request leaves; the server's answer comes with filled().
    const remote = new JsRuntime({ url: 'http://127.0.0.1:9' });
    assert.throws(
      () => remote.pool({ image: BUSYBOX, size: 65 }),
      (e: unknown) => e instanceof BoxError && e.code === 'invalid_option' && e.field === 'size',
    );
    await assert.rejects(
      remote.pool({ image: BUSYBOX, size: 1 }).filled(),
      (e: unknown) => e instanceof BoxError && e.code === 'unavailable',
    );
  });
});
