/**
 * `GET`/`HEAD /images/creatures/<number>.svg`: the creature's picture drawn by `art.ts`, with
 * `Cache-Control: public, max-age=86400`, a strong `ETag` of the bytes and `304 Not Modified` for a
 * matching `If-None-Match` (RFC 9110 §8.8.3, §13.1.2, §15.4.5). An edit of the creature's name or types
 * changes the bytes and so the ETag.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { creatureSvg, IMAGE_PREFIX } from '../art.ts';
import type { Store } from '../store.ts';

/** `Cache-Control` of the pictures: a day in shared and private caches, then revalidated by ETag. */
export const IMAGE_CACHE_CONTROL = 'public, max-age=86400';

/** Whether an `If-None-Match` header value matches `etag` (weak comparison, `*` matches anything). */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  const bare = etag.replace(/^W\//, '');
  return header.split(',').some((part) => {
    const tag = part.trim();
    return tag === '*' || tag.replace(/^W\//, '') === bare;
  });
}

/** A strong ETag of a body: the quoted base64url of its SHA-1 (27 characters). */
export function etagOf(body: string | Uint8Array): string {
  return `"${createHash('sha1').update(body).digest('base64url')}"`;
}

/**
 * Answers a request whose path starts with {@link IMAGE_PREFIX}: 200 with the SVG, 304 when the client's
 * copy is current, 404 (JSON error) for a path that names no creature. Only GET and HEAD reach it.
 */
export function serveCreatureImage(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  store: Store,
): void {
  const match = /^(\d{1,6})\.svg$/.exec(path.slice(IMAGE_PREFIX.length));
  const creature = match ? store.findCreature(match[1]!) : undefined;
  if (!creature) {
    const body = JSON.stringify({
      errors: [{ message: `No creature picture at ${path}; pictures are ${IMAGE_PREFIX}<number>.svg` }],
    });
    res.writeHead(404, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return;
  }
  const svg = creatureSvg(creature);
  const etag = etagOf(svg);
  const headers = {
    'cache-control': IMAGE_CACHE_CONTROL,
    etag,
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
  };
  if (etagMatches(req.headers['if-none-match'], etag)) {
    res.writeHead(304, headers);
    res.end();
    return;
  }
  res.writeHead(200, {
    ...headers,
    'content-type': 'image/svg+xml; charset=utf-8',
    'content-length': Buffer.byteLength(svg),
  });
  res.end(req.method === 'HEAD' ? undefined : svg);
}
