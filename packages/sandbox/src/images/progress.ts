/** Terminal progress bar of image pulls for the CLI (cli-progress). */
import cliProgress from 'cli-progress';
import type { PullProgress } from './store.ts';

const MIB = 1024 * 1024;

/**
 * Returns an `onProgress` callback that draws one bar per pull on `stream` (default stderr):
 * `<reference> [████░░] 42% | 12.3/29.0 MiB | layers 1/3 | downloading`. On a non-TTY stream only the
 * final line is printed. The bar stops itself at phase `done`.
 */
export function renderPullProgress(stream: NodeJS.WriteStream = process.stderr): (p: PullProgress) => void {
  let bar: cliProgress.SingleBar | undefined;
  let finished = false;
  return (p) => {
    if (finished) return;
    const payload = {
      reference: p.reference,
      phase: p.phase,
      layers: `${p.layersDone}/${p.layersTotal}`,
      done: (p.bytesDone / MIB).toFixed(1),
      total: (p.bytesTotal / MIB).toFixed(1),
    };
    if (!stream.isTTY) {
      if (p.phase === 'done') {
        finished = true;
        stream.write(`${p.reference}: pulled ${payload.layers} layers, ${payload.done} MiB\n`);
      }
      return;
    }
    if (!bar) {
      bar = new cliProgress.SingleBar(
        {
          stream,
          format: '{reference} [{bar}] {percentage}% | {done}/{total} MiB | layers {layers} | {phase}',
          hideCursor: true,
          clearOnComplete: false,
        },
        cliProgress.Presets.shades_classic,
      );
      bar.start(Math.max(p.bytesTotal, 1), 0, payload);
    }
    bar.setTotal(Math.max(p.bytesTotal, 1));
    bar.update(p.phase === 'done' ? Math.max(p.bytesTotal, 1) : p.bytesDone, payload);
    if (p.phase === 'done') {
      finished = true;
      bar.stop();
    }
  };
}
