/**
 * Teardown when the creator dies: many Node processes each create a non-detached box (container tier
 * with the network on, on with an `allowNet` policy, off; every fourth on the gVisor tier) and are
 * SIGKILLed at once. Each box must then be gone from the host: no process of it (init, supervisor,
 * slirp4netns, the gVisor sandbox and gofer, runsc), no mount naming it (root, disk, gateway namespace
 * file), no cgroup `seed-sandbox/<id>`, no `/run/netns/sbx-<id>`, and in the end no runsc deleting
 * its state of a dead sandbox either.
 *
 * The host is scanned until it is clean, up to `BOUND_MS` after the SIGKILLs: that bound only keeps a
 * broken teardown from hanging the suite (a box left for good fails the test); how fast boxes go is
 * measured by `bench/boxes-teardown.ts` (goal 1 s) and only reported here as a diagnostic.
 * `SEED_TEARDOWN_CREATORS` sets the number of creators (default `DEFAULT_CREATORS`).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type Created, leftovers, scanHost, spawnCreator, waitGone } from '../bench/boxes-creators.ts';
import { JsRuntime } from '../src/index.ts';
import { BUSYBOX, cleanupAll, ensureRegistry, REGISTRIES, tempHome } from './runtime-helpers.ts';

/**
 * Creators killed at once. Each is a Node process loading the runtime from source (≈ 60 MiB, ≈ 0.3 s
 * of CPU) and creating a box; 40 of them are up in about 25 s on the 2-core CI machine.
 */
const DEFAULT_CREATORS = 40;
const CREATORS = Number(process.env.SEED_TEARDOWN_CREATORS ?? DEFAULT_CREATORS);
/** Box options of the creators, in turn; every fourth creator's box is on the gVisor tier. */
const KINDS = [
  { network: { mode: 'enabled' } },
  { network: { mode: 'enabled', allowNet: ['example.com'] } },
  { network: { mode: 'disabled' } },
  { isolation: 'gvisor', network: { mode: 'enabled' } },
];
/**
 * Upper bound of the wait for the host to be clean (the goal is 1 s; 40 teardowns at once, gVisor ones
 * among them, on a loaded 2-core CI machine get ample slack: the bound only stops a hang).
 */
const BOUND_MS = 60_000;

let home: string;

before(async () => {
  ensureRegistry();
  home = tempHome('sandbox-teardown-');
  // The image, the disk templates of both tiers and the gVisor platform choice are made once here,
  // so that the creators only start boxes (not 40 pulls and formats of the same things at once).
  const runtime = new JsRuntime({ homeDir: home, imageRegistries: REGISTRIES });
  for (const isolation of ['container', 'gvisor'] as const) {
    const box = await runtime.create({ image: BUSYBOX, isolation, network: { mode: 'disabled' } });
    await runtime.remove(box.id, true);
  }
  await runtime.shutdown();
});

after(async () => {
  await cleanupAll();
});

test(`${CREATORS} creators SIGKILLed at once: their non-detached boxes (both tiers) leave no process, mount, cgroup or netns`, async (t) => {
  const creators = Array.from({ length: CREATORS }, (_, i) =>
    spawnCreator(home, REGISTRIES, BUSYBOX, KINDS[i % KINDS.length]!),
  );
  const exited = creators.map((c) => new Promise((resolve) => c.proc.once('exit', resolve)));
  let boxes: Created[];
  try {
    boxes = await Promise.all(creators.map((c) => c.created));
  } catch (error) {
    for (const c of creators) c.proc.kill('SIGKILL');
    throw error;
  }
  const running = scanHost();
  for (const box of boxes) {
    assert.notDeepEqual(leftovers(box, running), [], `box ${box.id} runs before its creator is killed`);
  }
  const killedAt = performance.now();
  for (const c of creators) c.proc.kill('SIGKILL');
  await Promise.all(exited);
  const { boxGoneMs, left } = await waitGone(boxes, killedAt, BOUND_MS);
  const gone = boxGoneMs.filter((ms): ms is number => ms !== undefined);
  t.diagnostic(
    `${gone.length} of ${boxes.length} boxes gone; the last ${Math.round(Math.max(...gone))} ms after the SIGKILLs`,
  );
  assert.deepEqual(left, []);
});
