/**
 * envd's plain HTTP routes (E2B `spec/envd/envd.yaml`): `GET /files?path=&username=` downloads a file
 * (gzip when the client accepts it), `POST /files?path=&username=` uploads as `multipart/form-data`
 * (each part's file name is its path when `path` is absent) or as `application/octet-stream` (optionally
 * `Content-Encoding: gzip`), answering `EntryInfo[]` `{ name, type, path }`. Signed URLs
 * (`signature=v1_<base64 sha256("path:read|write:user:token[:exp]")>`, `signature_expiration` in unix
 * seconds) stand for the access token. File metadata (`X-Metadata-*` upload headers) is refused with
 * 400 rather than dropped. Errors are `{ code, message }`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import { Busboy, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import { BoxError } from '../errors.ts';
import { type EnvdRequest, resolvePath } from './envd-context.ts';
import { chown } from './envd-filesystem.ts';
import type { E2bSandbox } from './sandboxes.ts';
import { E2bError, e2bErrorOf } from './wire.ts';

/** Most files one multipart upload may carry. */
export const MAX_UPLOAD_PARTS = 1000;
/** Largest decompressed upload accepted with `Content-Encoding: gzip`, bytes (4 GiB). */
export const MAX_GUNZIP_BYTES = 4 * 1024 ** 3;

/** The signature of a signed `/files` URL for `path`, `operation`, `user` and expiry (unix seconds). */
export function signatureOf(
  record: E2bSandbox,
  path: string,
  operation: 'read' | 'write',
  user: string,
  expiration: number | null,
): string {
  const raw = `${path}:${operation}:${user}:${record.accessToken}${expiration === null ? '' : `:${expiration}`}`;
  return `v1_${createHash('sha256').update(raw).digest('base64').replace(/=+$/, '')}`;
}

/**
 * Whether the query's `signature` (and `signature_expiration`, unexpired) signs this `/files` request.
 * The signed user is the `username` parameter as the client sent it (empty when absent).
 */
export function signatureValid(
  record: E2bSandbox,
  query: URLSearchParams,
  operation: 'read' | 'write',
): boolean {
  const signature = query.get('signature');
  if (!signature) return false;
  const expRaw = query.get('signature_expiration');
  const expiration = expRaw === null ? null : Number(expRaw);
  if (expiration !== null && (!Number.isInteger(expiration) || expiration * 1000 < Date.now())) return false;
  const expected = signatureOf(
    record,
    query.get('path') ?? '',
    operation,
    query.get('username') ?? '',
    expiration,
  );
  const a = Buffer.from(expected);
  const b = Buffer.from(signature);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Sends `{ code, message }` with its status. */
export function sendError(res: ServerResponse, error: unknown): void {
  const body = e2bErrorOf(error);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(body.code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** `GET /files`: the file's bytes. @throws BoxError `not_found`; E2bError 400 for a directory or no path. */
export async function download(
  request: EnvdRequest,
  req: IncomingMessage,
  res: ServerResponse,
  query: URLSearchParams,
): Promise<void> {
  const raw = query.get('path');
  if (!raw) throw new E2bError(400, 'query parameter path: required');
  const path = resolvePath(raw, request.user);
  const info = await request.box.files.stat(path);
  if (info.type === 'dir') throw new E2bError(400, `path ${path} is a directory`);
  const stream = await request.box.files.readNode(path);
  const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
  const name = path.split('/').pop() ?? 'file';
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name)}`,
    ...(gzip ? { 'content-encoding': 'gzip' } : { 'content-length': String(info.size) }),
  });
  await pipeline(gzip ? [stream, createGzip(), res] : [stream, res]).catch(() => res.destroy());
}

/** Counts bytes through a stream, failing past `max`. */
function limit(max: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > max) done(new E2bError(400, `the decompressed upload exceeds ${max} bytes`));
      else done(null, chunk);
    },
  });
}

async function writeOne(
  request: EnvdRequest,
  rawPath: string,
  data: Readable,
): Promise<Record<string, unknown>> {
  if (rawPath === '' || rawPath.includes('\0')) throw new E2bError(400, 'path: a file path is required');
  const path = resolvePath(rawPath, request.user);
  const written = await request.box.files.write(path, data);
  await chown(request, written.path);
  return { name: written.name, type: 'file', path: written.path };
}

/** `POST /files`: writes the uploaded files; answers their `EntryInfo`s. */
export async function upload(
  request: EnvdRequest,
  req: IncomingMessage,
  res: ServerResponse,
  query: URLSearchParams,
): Promise<void> {
  if (Object.keys(req.headers).some((name) => name.startsWith('x-metadata-'))) {
    throw new E2bError(400, 'X-Metadata-* headers: file metadata is not stored by this server');
  }
  const type = String(req.headers['content-type'] ?? '');
  const path = query.get('path');
  const written: Record<string, unknown>[] = [];
  if (type.startsWith('multipart/form-data')) {
    let bb: BusboyInstance;
    try {
      bb = new Busboy({
        headers: req.headers as BusboyHeaders,
        preservePath: true,
        limits: { files: MAX_UPLOAD_PARTS, fields: 100 },
      });
    } catch (error) {
      throw new E2bError(400, `malformed multipart body: ${(error as Error).message}`);
    }
    let chain: Promise<void> = Promise.resolve();
    let failure: unknown = null;
    bb.on('file', (_field: string, file: Readable, filename: string) => {
      const target = path ?? filename;
      // Parts are written one after the other; each part's stream is consumed by its write.
      chain = chain.then(async () => {
        if (failure) {
          file.resume();
          return;
        }
        try {
          written.push(await writeOne(request, target ?? '', file));
        } catch (error) {
          failure = error;
          file.resume();
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      bb.on('finish', () => resolve());
      bb.on('error', (error: Error) =>
        reject(new E2bError(400, `malformed multipart body: ${error.message}`)),
      );
      req.pipe(bb);
    });
    await chain;
    if (failure) throw failure;
  } else {
    if (!path) throw new E2bError(400, 'query parameter path: required for an octet-stream upload');
    const encoding = String(req.headers['content-encoding'] ?? '').toLowerCase();
    if (encoding !== '' && encoding !== 'identity' && encoding !== 'gzip') {
      throw new E2bError(400, `Content-Encoding ${encoding}: only gzip is accepted`);
    }
    const body: Readable = encoding === 'gzip' ? req.pipe(createGunzip()).pipe(limit(MAX_GUNZIP_BYTES)) : req;
    try {
      written.push(await writeOne(request, path, body));
    } catch (error) {
      if (error instanceof Error && 'code' in error && (error as { code: unknown }).code === 'Z_DATA_ERROR') {
        throw new E2bError(400, 'the gzip body is malformed');
      }
      throw error;
    }
  }
  if (written.length === 0) throw new E2bError(400, 'the upload carried no file');
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(written));
}

/** Errors of the box's files API that are the client's: paths, permissions. */
export function isClientFileError(error: unknown): boolean {
  return error instanceof BoxError && error.code !== 'internal';
}
