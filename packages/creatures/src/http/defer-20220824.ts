/**
 * The older incremental delivery format that Apollo Client 3, Apollo Client 4's `Defer20220824Handler`
 * and Apollo Router speak: `multipart/mixed;deferSpec=20220824` (the `@defer`/`@stream` RFC as of the
 * GraphQL spec commit 48cf7263 of 2022-08-24). Payloads there are
 *
 * - first `{ data, errors?, hasNext }`;
 * - then `{ incremental: [{ data, path, label?, errors? } | { items, path, label?, errors? }], hasNext }`,
 *   where a deferred fragment's `path` is the object it belongs to and a streamed item's `path` ends with
 *   the index of its first item in the list.
 *
 * graphql-js 17 answers in the newer format (`pending` announcements with ids, `incremental` entries
 * naming an id and an optional `subPath`, `completed` entries). {@link toDefer20220824} rewrites one
 * stream of payloads into the other, keeping a copy of the data delivered so far to number streamed
 * items. A deferred fragment or stream that fails (`completed` with `errors`) becomes an entry with
 * `data: null` or `items: null` and those errors, as the older format reports it.
 */
import type { IncrementalPayload } from '../incremental.ts';

/** Whether an `Accept` header asks for the 2022-08-24 format (and not for the newer `incrementalSpec`). */
export function wantsDefer20220824(accept: string): boolean {
  const lower = accept.toLowerCase();
  return lower.includes('deferspec=20220824') && !lower.includes('incrementalspec=');
}

type Path = (string | number)[];
type Json = Record<string, unknown>;

interface Pending {
  path: Path;
  label?: string;
}

/** The value at `path` under `root`, or undefined. */
function at(root: unknown, path: Path): unknown {
  let value = root;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<string | number, unknown>)[key];
  }
  return value;
}

/** Merges `source` into `target` key by key (objects and arrays recursively); returns `target`. */
function merge(target: unknown, source: unknown): unknown {
  if (target === null || typeof target !== 'object' || source === null || typeof source !== 'object')
    return source;
  const into = target as Record<string, unknown>;
  for (const [key, value] of Object.entries(source)) into[key] = merge(into[key], value);
  return target;
}

/** A copy of a JSON value (the data tree must not share objects with payloads already written). */
function copy<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/**
 * Rewrites graphql-js 17 incremental payloads into deferSpec 2022-08-24 payloads, in order. Payloads
 * that carry nothing in the older format (only announcements, or a completion without errors) are
 * left out unless they end the stream (`hasNext: false`).
 */
export async function* toDefer20220824(
  payloads: AsyncGenerator<IncrementalPayload, void, void>,
): AsyncGenerator<IncrementalPayload, void, void> {
  const pending = new Map<string, Pending>();
  const tree: { data?: unknown } = {};
  const announce = (list: unknown) => {
    for (const p of (list as { id: string; path: Path; label?: string }[] | undefined) ?? [])
      pending.set(p.id, { path: p.path, ...(p.label === undefined ? {} : { label: p.label }) });
  };
  let first = true;
  try {
    for await (const payload of payloads) {
      if (first) {
        first = false;
        const { pending: announced, ...rest } = payload;
        announce(announced);
        tree.data = copy(payload.data);
        yield rest as IncrementalPayload;
        continue;
      }
      announce(payload.pending);
      const out: Json[] = [];
      for (const entry of (payload.incremental as Json[] | undefined) ?? []) {
        const origin = pending.get(entry.id as string);
        if (!origin) continue;
        const label = origin.label === undefined ? {} : { label: origin.label };
        const extra = {
          ...(entry.errors ? { errors: entry.errors } : {}),
          ...(entry.extensions ? { extensions: entry.extensions } : {}),
        };
        if ('items' in entry) {
          const list = at(tree.data, origin.path);
          const items = entry.items as unknown[];
          const index = Array.isArray(list) ? list.length : 0;
          if (Array.isArray(list)) list.push(...copy(items));
          out.push({ items, path: [...origin.path, index], ...label, ...extra });
        } else {
          const path = [...origin.path, ...((entry.subPath as Path | undefined) ?? [])];
          const parent = at(tree.data, path);
          if (parent !== undefined) merge(parent, copy(entry.data));
          out.push({ data: entry.data, path, ...label, ...extra });
        }
      }
      for (const done of (payload.completed as Json[] | undefined) ?? []) {
        const origin = pending.get(done.id as string);
        pending.delete(done.id as string);
        if (!origin || !done.errors) continue;
        const label = origin.label === undefined ? {} : { label: origin.label };
        const list = at(tree.data, origin.path);
        out.push(
          Array.isArray(list)
            ? { items: null, path: [...origin.path, list.length], ...label, errors: done.errors }
            : { data: null, path: origin.path, ...label, errors: done.errors },
        );
      }
      if (out.length === 0 && payload.hasNext !== false) continue;
      yield {
        ...(out.length > 0 ? { incremental: out } : {}),
        ...(payload.extensions ? { extensions: payload.extensions } : {}),
        hasNext: payload.hasNext ?? false,
      };
    }
  } finally {
    await payloads.return(undefined);
  }
}
