/**
 * The default runtime (spec 002 `withDefaultConfig`, `initDefault`, `close`): `initDefault(options)`
 * configures the runtime that `withDefaultConfig()` and option-less wrapper boxes use. Own file: the
 * default runtime is process-wide.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BoxError, JsRuntime, SimpleBox } from '../src/index.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, REGISTRIES, tempHome } from './runtime-helpers.ts';

describe('default runtime', () => {
  before(() => ensureRegistry());

  it('initDefault configures withDefaultConfig, which SimpleBox uses without a runtime option', async () => {
    const home = tempHome();
    JsRuntime.initDefault({ homeDir: home, imageRegistries: REGISTRIES });
    const runtime = JsRuntime.withDefaultConfig();
    assert.equal(runtime.homeDir, home);
    assert.equal(JsRuntime.withDefaultConfig(), runtime, 'one default runtime per process');
    assert.throws(
      () => JsRuntime.initDefault({}),
      (error: unknown) => error instanceof BoxError,
    );

    const box = new SimpleBox({ image: BUSYBOX, name: 'on-default' });
    assert.equal((await box.exec('echo', 'default')).stdout, 'default\n');
    assert.equal((await runtime.getInfo('on-default'))?.id, box.id);
    await box.stop();
    assert.equal(runtime.close(), undefined);
    // close() is a no-op: the runtime keeps working.
    assert.deepEqual(await runtime.listInfo(), []);
  });

  it('rejects invalid runtime options naming the field', () => {
    assert.throws(
      () => new JsRuntime({ homeDir: '' }),
      (e: unknown) => e instanceof BoxError && e.field === 'homeDir',
    );
    assert.throws(
      () => new JsRuntime({ imageRegistries: 'x' as never }),
      (e: unknown) => e instanceof BoxError && e.field === 'imageRegistries',
    );
  });
});

after(cleanupAll);
