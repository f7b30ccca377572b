/**
 * Cost of networking at box creation (issue 9): create → first exec result (`JsRuntime.create` +
 * `exec('true')` until its exit) of a busybox box per network setting, rounds interleaved, p50 and max in
 * ms. Needs root and the local test registry (`npm run registry -w @seed/sandbox`).
 * Usage: `node bench/network.ts [rounds=15]`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { JsRuntime } from '../src/js-runtime.ts';
import type { JsBoxOptions } from '../src/types.ts';

const rounds = Number(process.argv[2] ?? 15);
const home = mkdtempSync('/tmp/netbench-');
const runtime = new JsRuntime({
  homeDir: home,
  imageRegistries: [{ host: '127.0.0.1:5000', transport: 'http', search: true }],
});
const image = 'busybox:latest';
await (await runtime.create({ image, autoRemove: true })).stop(); // warm image
const cases: [string, Partial<JsBoxOptions>][] = [
  ['disabled', { network: { mode: 'disabled' } }],
  ['enabled', {}],
  ['enabled+allowNet', { network: { mode: 'enabled', allowNet: ['host.sandbox.internal'] } }],
  ['enabled+port', { ports: [{ guestPort: 80 }] }],
  ['enabled+secret', { secrets: [{ name: 'K', value: 'v' }] }],
];
const samples = new Map<string, number[]>();
try {
  for (let round = 0; round < rounds; round++) {
    for (const [name, options] of cases) {
      const t0 = performance.now();
      const box = await runtime.create({ image, ...options });
      await (await box.exec('true')).wait();
      const list = samples.get(name) ?? [];
      list.push(performance.now() - t0);
      samples.set(name, list);
      await runtime.remove(box.id, true);
    }
  }
  console.log(`${'ms'.padEnd(18)} create→exec p50    max`);
  for (const [name, list] of samples) {
    list.sort((a, b) => a - b);
    const p50 = list[Math.floor(list.length / 2)]!;
    console.log(`${name.padEnd(18)} ${p50.toFixed(1).padStart(15)} ${list.at(-1)!.toFixed(1).padStart(6)}`);
  }
} finally {
  rmSync(home, { recursive: true, force: true });
}
