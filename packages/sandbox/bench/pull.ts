/**
 * Bench: cold pull + unpack of `python:slim` from the local registry with `ImageStore`, against
 * `skopeo copy` + `umoci unpack` doing the same in the same run; then the warm second "pull" (what a second
 * box of the same image pays). Prints medians in ms and the ratio.
 *
 *   npm run bench:pull -w @seed/sandbox [-- --runs 3 --image 127.0.0.1:5000/library/python:slim]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ImageStore } from '../src/images/index.ts';
import { localRegistry } from '../test/helpers/registry.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '3' },
    image: { type: 'string', default: '127.0.0.1:5000/library/python:slim' },
  },
});
const runs = Number(values.runs);
const image = values.image;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => `${x.toFixed(0)} ms`;

await localRegistry({ images: ['busybox', 'python'] });
const ours: number[] = [];
const warm: number[] = [];
const skopeo: number[] = [];
const umoci: number[] = [];
for (let i = 0; i < runs; i++) {
  // ours: cold store
  const home = mkdtempSync(join(tmpdir(), 'seed-bench-pull-'));
  execFileSync('sync');
  let t = performance.now();
  const store = new ImageStore({ homeDir: home });
  await store.pull(image);
  ours.push(performance.now() - t);
  // warm: a second box of the same image, from a new store object (as a new process would)
  t = performance.now();
  await new ImageStore({ homeDir: home }).pull(image);
  warm.push(performance.now() - t);
  rmSync(home, { recursive: true, force: true });

  // reference tools
  const work = mkdtempSync(join(tmpdir(), 'seed-bench-umoci-'));
  execFileSync('sync');
  t = performance.now();
  execFileSync('skopeo', [
    'copy',
    '--quiet',
    '--src-tls-verify=false',
    `docker://${image}`,
    `oci:${work}/oci:img`,
  ]);
  skopeo.push(performance.now() - t);
  t = performance.now();
  execFileSync('umoci', ['unpack', '--image', `${work}/oci:img`, `${work}/bundle`], { stdio: 'ignore' });
  umoci.push(performance.now() - t);
  rmSync(work, { recursive: true, force: true });
  console.error(
    `run ${i + 1}/${runs}: ours ${ms(ours[i]!)} | skopeo ${ms(skopeo[i]!)} + umoci ${ms(umoci[i]!)} | warm ${warm[i]!.toFixed(2)} ms`,
  );
}
const tools = skopeo.map((s, i) => s + umoci[i]!);
console.log(`image: ${image} (${runs} runs, medians)`);
console.log(`ImageStore cold pull + unpack:   ${ms(median(ours))}`);
console.log(
  `skopeo copy + umoci unpack:      ${ms(median(tools))} (skopeo ${ms(median(skopeo))}, umoci ${ms(median(umoci))})`,
);
console.log(`ratio ours / tools:              ${(median(ours) / median(tools)).toFixed(2)}`);
console.log(`warm second pull (stored image): ${median(warm).toFixed(2)} ms`);
