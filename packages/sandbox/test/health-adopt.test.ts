/**
 * Health checks of a detached box outlive the process that created it: that process records the status
 * with its identity and exits; the next runtime instance that loads the box (another process) takes the
 * checks over and goes on from the recorded status.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, it } from 'node:test';
import {
  BUSYBOX,
  cleanupAll,
  ensureRegistry,
  REGISTRIES,
  run,
  tempHome,
  testRuntime,
} from './runtime-helpers.ts';

after(cleanupAll);

it('another process takes over the checks of a detached box whose creating process exited', async () => {
  ensureRegistry();
  const home = tempHome('sandbox-health-adopt-');
  const runtimeModule = join(import.meta.dirname, '..', 'src', 'index.ts');
  // The creating process: a detached box whose check fails until /tmp/ok exists; it exits once the box
  // is unhealthy.
  const script = `
    const { JsRuntime } = await import(${JSON.stringify(runtimeModule)});
    const runtime = new JsRuntime({ homeDir: ${JSON.stringify(home)}, imageRegistries: ${JSON.stringify(REGISTRIES)} });
    const box = await runtime.create({
      image: ${JSON.stringify(BUSYBOX)}, network: { mode: 'disabled' }, detach: true,
      healthCheck: { interval: 0.5, timeout: 2, retries: 1, command: ['CMD-SHELL', 'test -f /tmp/ok'] },
    }, 'adopted');
    const deadline = Date.now() + 30000;
    while ((await box.info()).healthStatus.state !== 'unhealthy' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    process.stdout.write((await box.info()).healthStatus.state);
    process.exit(0);
  `;
  const child = spawnSync(
    process.execPath,
    ['--conditions=seed-source', '--input-type=module', '-e', script],
    {
      encoding: 'utf8',
      timeout: 60_000,
    },
  );
  assert.equal(child.status, 0, child.stderr);
  assert.equal(child.stdout, 'unhealthy');

  const runtime = testRuntime(home);
  // Loading the box takes the checks over from the recorded status; the process identity stays internal.
  const recorded = (await runtime.getInfo('adopted'))!;
  assert.equal(recorded.state.status, 'running');
  assert.equal(recorded.healthStatus?.state, 'unhealthy');
  assert.deepEqual(Object.keys(recorded.healthStatus!).sort(), ['failures', 'lastCheck', 'state']);
  const box = (await runtime.get('adopted'))!;
  assert.equal((await run(box, 'touch', ['/tmp/ok'])).exitCode, 0);
  const deadline = Date.now() + 30_000;
  let state = (await box.info()).healthStatus?.state;
  while (state !== 'healthy' && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    state = (await box.info()).healthStatus?.state;
  }
  assert.equal(state, 'healthy');
  await runtime.remove('adopted', true);
});
