/**
 * Bounds on what images and box archives may cost the host, so that a hostile image cannot exhaust it:
 * unpacked bytes and entry counts per layer and per image, a disk budget for the whole image store, and the
 * size of a box archive accepted by import. Every bound is refused with a `BoxError` of code `image` that names it.
 */
import { BoxError, invalidOption } from '../errors.ts';

/** Configurable bounds (`JsOptions.imageLimits`, `ImageStore` option `limits`). Sizes in bytes. */
export interface ImageLimits {
  /** Regular-file bytes one layer may unpack to (tar header sizes, skipped entries included). Default 8 GiB. */
  maxLayerBytes: number;
  /** Tar entries in one layer. Default 500,000. */
  maxLayerEntries: number;
  /** Unpacked bytes of all layers of one image (or box archive). Default 16 GiB. */
  maxImageBytes: number;
  /** Tar entries of all layers of one image. Default 1,000,000. */
  maxImageEntries: number;
  /** Unpacked plus compressed bytes the image store may hold on disk in all. Default 128 GiB. */
  maxStoreBytes: number;
  /** Bytes of a box archive read by `importBox` / `POST /v1/boxes/import`. Default 16 GiB. */
  maxImportBytes: number;
}

const GiB = 1024 ** 3;

/** The defaults of {@link ImageLimits}. */
export const DEFAULT_IMAGE_LIMITS: Readonly<ImageLimits> = Object.freeze({
  maxLayerBytes: 8 * GiB,
  maxLayerEntries: 500_000,
  maxImageBytes: 16 * GiB,
  maxImageEntries: 1_000_000,
  maxStoreBytes: 128 * GiB,
  maxImportBytes: 16 * GiB,
});

/**
 * The defaults overridden by `given`.
 * @param field the option's name in errors (e.g. `imageLimits`).
 * @throws BoxError `invalid_option` naming `<field>.<bound>` when a value is not a positive safe integer
 *   or a key is unknown.
 */
export function resolveImageLimits(
  given: Partial<ImageLimits> | undefined,
  field = 'imageLimits',
): ImageLimits {
  if (given === undefined) return { ...DEFAULT_IMAGE_LIMITS };
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw invalidOption(field, `invalid option ${field}: must be an object of byte and entry bounds`);
  }
  const out: ImageLimits = { ...DEFAULT_IMAGE_LIMITS };
  for (const [key, value] of Object.entries(given)) {
    if (!(key in DEFAULT_IMAGE_LIMITS)) {
      throw invalidOption(`${field}.${key}`, `invalid option ${field}.${key}: unknown bound`);
    }
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
      throw invalidOption(`${field}.${key}`, `invalid option ${field}.${key}: must be a positive integer`);
    }
    out[key as keyof ImageLimits] = value;
  }
  return out;
}

/** One bound of a budget: its option name (used in errors) and its value. */
export interface Bound {
  name: string;
  max: number;
}

/** What an unpack takes its bytes and entries from before it writes them (`extractLayer`'s budgets). */
export interface Budget {
  /** Takes `bytes` and `entries`. @throws BoxError `image` naming the bound (nothing is taken then). */
  take(bytes: number, entries: number): void;
  /** Gives back what `take` took. */
  give(bytes: number, entries?: number): void;
}

/**
 * A running count of bytes and entries against a bound each, in one process; shared by every unpack it
 * is passed to (all layers of one image share the image's budget). The store-wide budget, shared by
 * processes, is `StoreBudget` (`store-budget.ts`).
 */
export class UnpackBudget implements Budget {
  /** Bytes taken so far. */
  usedBytes = 0;
  /** Entries taken so far. */
  usedEntries = 0;
  /** The byte bound (e.g. `{ name: 'maxLayerBytes', max }`). */
  readonly bytes: Bound;
  /** The entry bound, when this budget counts entries. */
  readonly entries?: Bound;
  /**
   * @param bytes the byte bound.
   * @param entries the entry bound, when this budget counts entries.
   */
  constructor(bytes: Bound, entries?: Bound) {
    this.bytes = bytes;
    if (entries) this.entries = entries;
  }

  /**
   * Takes `bytes` and `entries` before they are written.
   * @throws BoxError `image` naming the bound when either would be exceeded (nothing is taken then).
   */
  take(bytes: number, entries: number): void {
    if (this.usedBytes + bytes > this.bytes.max) {
      throw new BoxError(`unpacked size exceeds ${this.bytes.name} (${this.bytes.max} bytes)`, {
        code: 'image',
      });
    }
    if (this.entries && this.usedEntries + entries > this.entries.max) {
      throw new BoxError(`entry count exceeds ${this.entries.name} (${this.entries.max} entries)`, {
        code: 'image',
      });
    }
    this.usedBytes += bytes;
    this.usedEntries += entries;
  }

  /** Gives back what `take` took (an unpack that failed, a layer removed). */
  give(bytes: number, entries = 0): void {
    this.usedBytes = Math.max(0, this.usedBytes - bytes);
    this.usedEntries = Math.max(0, this.usedEntries - entries);
  }
}
