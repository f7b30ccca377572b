/**
 * Layer jobs: all layers of an image ensured up to three at a time (the first failure aborts the rest),
 * each layer reused when stored, shared when another pull is unpacking it (one `SharedJob` per digest),
 * else fetched and unpacked by `layer-unpack.ts`, with up to two retries of transient network failures.
 * The image's bounds (`maxImageBytes`, `maxImageEntries`) hold for every image, also one made of layers
 * that were already stored or unpacked by another pull.
 */
import { BoxError } from '../errors.ts';
import { isTransient } from './client.ts';
import { LAYER_MEDIA_TYPES } from './digest.ts';
import type { PullProgress } from './image-types.ts';
import { SharedJob, SharedJobs, withRetries } from './job.ts';
import { type LayerSource, OversizeBlobError, unpackLayer } from './layer-unpack.ts';
import { UnpackBudget } from './limits.ts';
import type { Descriptor } from './oci.ts';
import type { LayerRecord, StoreFiles } from './store-files.ts';

const LAYER_CONCURRENCY = 3;

/** Events of a layer job: compressed bytes (negative when a failed attempt's bytes are taken back), or the blob verified. */
type LayerEvent = { bytes: number } | 'downloaded';

/** The layer jobs of one store (see the module comment). */
export class LayerJobs {
  private readonly files: StoreFiles;
  private readonly jobs = new SharedJobs<string, LayerRecord, LayerEvent>();

  /** @param files the store's files. */
  constructor(files: StoreFiles) {
    this.files = files;
  }

  /** Digests of layers being unpacked in this process (garbage collection keeps them). */
  inFlight(): string[] {
    return [...this.jobs.keys()];
  }

  /**
   * Ensures all `layers` are unpacked; updates `progress` and calls `emit` (byte progress at most every
   * 100 ms, and once per finished layer).
   * @throws BoxError `image` for an unsupported media type, any layer's failure, or an image over its bounds.
   */
  async ensureAll(
    source: LayerSource,
    layers: Descriptor[],
    diffIds: string[],
    progress: PullProgress,
    emit: (p: PullProgress) => void,
    signal: AbortSignal,
  ): Promise<LayerRecord[]> {
    const limits = this.files.limits;
    const imageBudget = new UnpackBudget(
      { name: 'maxImageBytes', max: limits.maxImageBytes },
      { name: 'maxImageEntries', max: limits.maxImageEntries },
    );
    const local = new AbortController();
    const onAbort = () => local.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    let last = 0;
    const listener = (e: LayerEvent) => {
      if (e === 'downloaded') {
        progress.phase = 'unpacking';
        return;
      }
      progress.bytesDone += e.bytes;
      const now = Date.now();
      if (now - last >= 100) {
        last = now;
        emit({ ...progress });
      }
    };
    const out: LayerRecord[] = new Array(layers.length);
    let next = 0;
    const worker = async () => {
      while (next < layers.length) {
        const i = next++;
        const desc = layers[i]!;
        if (!LAYER_MEDIA_TYPES.has(desc.mediaType)) {
          throw new BoxError(`layer ${desc.digest} has unsupported media type '${desc.mediaType}'`, {
            code: 'image',
          });
        }
        out[i] = await this.ensure(source, desc, diffIds[i], imageBudget, listener, local.signal);
        progress.layersDone++;
        emit({ ...progress });
      }
    };
    try {
      await Promise.all(
        Array.from({ length: Math.min(LAYER_CONCURRENCY, layers.length) }, () =>
          worker().catch((e) => {
            local.abort(e);
            throw e;
          }),
        ),
      );
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    const bytes = out.reduce((a, r) => a + r.sizeBytes, 0);
    const entries = out.reduce((a, r) => a + (r.entries ?? 0), 0);
    if (bytes > limits.maxImageBytes) {
      throw new BoxError(`unpacked size exceeds maxImageBytes (${limits.maxImageBytes} bytes)`, {
        code: 'image',
      });
    }
    if (entries > limits.maxImageEntries) {
      throw new BoxError(`entry count exceeds maxImageEntries (${limits.maxImageEntries} entries)`, {
        code: 'image',
      });
    }
    return out;
  }

  /** One layer: stored, shared, or fetched and unpacked (see the module comment). */
  private ensure(
    source: LayerSource,
    desc: Descriptor,
    diffId: string | undefined,
    imageBudget: UnpackBudget,
    listener: (e: LayerEvent) => void,
    signal: AbortSignal,
  ): Promise<LayerRecord> {
    const job = this.jobs.get(desc.digest, () => {
      let bytes = 0;
      let downloaded = false;
      return new SharedJob<LayerRecord, LayerEvent>(
        async (self, jobSignal) => {
          const stored = await this.files.readLayer(desc.digest);
          if (stored) return stored;
          let before = 0;
          return withRetries(
            3,
            () => {
              before = bytes;
              return unpackLayer(
                this.files,
                source,
                desc,
                diffId,
                imageBudget,
                {
                  onBytes: (n) => {
                    bytes += n;
                    self.emit({ bytes: n });
                  },
                  onDownloaded: () => {
                    downloaded = true;
                    self.emit('downloaded');
                  },
                },
                jobSignal,
              );
            },
            (err) => isTransient(err) || err instanceof OversizeBlobError,
            jobSignal,
            () => {
              // A retry downloads again: take back the failed attempt's bytes.
              self.emit({ bytes: before - bytes });
              bytes = before;
            },
          );
        },
        (l) => {
          if (bytes > 0) l({ bytes });
          if (downloaded) l('downloaded');
        },
      );
    });
    return job.wait(listener, signal, (reason) =>
      reason instanceof Error ? reason : new BoxError('aborted', { code: 'image' }),
    );
  }
}
