/**
 * Test helper: makes sure the local offline registries run and hold the offline images, by running
 * `scripts/registry.ts` (serialized across parallel test files by a lock). Import and await once per file:
 *
 *   const reg = await localRegistry();                 // busybox:latest and library/python:slim on :5000
 *   new ImageStore({ homeDir, registries: reg.registries });
 *   const auth = await localRegistry({ auth: true });  // htpasswd registry on :5001, same images
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import tar from 'tar-stream';
import { AUTH_PASSWORD, AUTH_REGISTRY_HOST, AUTH_USER, REGISTRY_HOST } from '../../scripts/offline-images.ts';
// internal: builds test images in the OCI format the store reads
import { type Descriptor, hostArchitecture, MediaType } from '../../src/images/oci.ts';
// internal: pushes test images to the local registry
import { pushImage, sha256Digest } from '../../src/images/push.ts';
import type { JsImageRegistry } from '../../src/index.ts';

/** A ready local registry: its host, `imageRegistries` config resolving `python:slim` etc. through it. */
export interface LocalRegistry {
  /** `127.0.0.1:5000` (anonymous) or `127.0.0.1:5001` (htpasswd). */
  host: string;
  /** `[{ host, transport: 'http', search: true, auth? }]` — pass as `JsOptions.imageRegistries`. */
  registries: JsImageRegistry[];
  /** Credentials of the auth registry (absent for the anonymous one). */
  credentials?: { username: string; password: string };
}

const script = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'scripts', 'registry.ts');
const ready = new Map<string, Promise<void>>();

/**
 * Ensures the registry runs and holds `images` (default busybox and python; python is built with
 * mmdebstrap on first use, ≈ 40 s, normally already done by `npm run test:setup`). Rejects with the
 * script's output when it fails.
 */
export async function localRegistry(
  options: { auth?: boolean; images?: ('busybox' | 'python')[] } = {},
): Promise<LocalRegistry> {
  const images = (options.images ?? ['busybox', 'python']).join(',');
  const args = [script, '--quiet', '--images', images, ...(options.auth ? ['--auth'] : [])];
  const key = args.join(' ');
  let p = ready.get(key);
  if (!p) {
    p = promisify(execFile)(process.execPath, args, { timeout: 300_000 }).then(
      () => undefined,
      (err: Error & { stderr?: string }) => {
        ready.delete(key);
        throw new Error(`local registry setup failed: ${err.stderr || err.message}`);
      },
    );
    ready.set(key, p);
  }
  await p;
  if (options.auth) {
    const credentials = { username: AUTH_USER, password: AUTH_PASSWORD };
    return {
      host: AUTH_REGISTRY_HOST,
      registries: [{ host: AUTH_REGISTRY_HOST, transport: 'http', search: true, auth: credentials }],
      credentials,
    };
  }
  return { host: REGISTRY_HOST, registries: [{ host: REGISTRY_HOST, transport: 'http', search: true }] };
}

/** One entry of a fixture layer (tar-stream header fields; `content` for regular files). */
export interface FixtureEntry {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device' | 'fifo';
  content?: string | Buffer;
  linkname?: string;
  mode?: number;
  uid?: number;
  gid?: number;
  /** Written with a GNU sparse header (type flag `S`) and no sparse map: what a hostile layer may hold. */
  sparse?: boolean;
}

/** Raw (uncompressed) tar of `entries` in order (hostile names allowed on purpose; `sparse` ones get a GNU sparse header). */
export async function tarOf(entries: FixtureEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const sparse: number[] = [];
  let offset = 0;
  for (const e of entries) {
    const type = e.type ?? 'file';
    const content = type === 'file' ? Buffer.from(e.content ?? '') : Buffer.alloc(0);
    if (e.sparse) sparse.push(offset);
    pack.entry(
      {
        name: e.name,
        type,
        linkname: e.linkname,
        mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644),
        uid: e.uid ?? 0,
        gid: e.gid ?? 0,
        mtime: new Date('2024-01-01T00:00:00Z'),
      },
      content,
    );
    offset += 512 + Math.ceil(content.length / 512) * 512;
  }
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const c of pack) chunks.push(c as Buffer);
  const raw = Buffer.concat(chunks);
  // GNU sparse entries ('S'): the same header with its type flag changed and the checksum redone.
  for (const at of sparse) {
    raw[at + 156] = 'S'.charCodeAt(0);
    raw.fill(' ', at + 148, at + 156);
    let sum = 0;
    for (let i = at; i < at + 512; i++) sum += raw[i]!;
    raw.write(`${sum.toString(8).padStart(6, '0')}\0 `, at + 148, 'latin1');
  }
  return raw;
}

/** A built layer blob with its media type and diff id, ready for `pushImage`. */
export interface FixtureLayer {
  data: Buffer;
  mediaType: string;
  diffId: string;
}

/**
 * Builds a layer tarball from `entries` in order (hostile names allowed on purpose), compressed with gzip
 * (default), zstd or not at all. Deterministic: same entries, same digest.
 */
export async function buildLayer(
  entries: FixtureEntry[],
  compression: 'gzip' | 'zstd' | 'none' = 'gzip',
): Promise<FixtureLayer> {
  const raw = await tarOf(entries);
  const diffId = sha256Digest(raw);
  if (compression === 'none') return { data: raw, mediaType: MediaType.ociLayerTar, diffId };
  if (compression === 'zstd')
    return { data: zlib.zstdCompressSync(raw), mediaType: MediaType.ociLayerZstd, diffId };
  return { data: zlib.gzipSync(raw), mediaType: MediaType.ociLayerGzip, diffId };
}

/** Pushes a fixture image `seed-test/<name>:<tag>` to the anonymous local registry. Returns the manifest descriptor. */
export async function pushFixture(
  name: string,
  layers: FixtureLayer[],
  options: { tag?: string; architecture?: string; cmd?: string[] } = {},
): Promise<{ reference: string; digest: string; manifest: Descriptor }> {
  const repository = `seed-test/${name}`;
  const tag = options.tag ?? 'latest';
  const { digest, manifest } = await pushImage(
    { host: REGISTRY_HOST },
    repository,
    [tag],
    layers.map((l) => ({ blob: { data: l.data }, mediaType: l.mediaType, diffId: l.diffId })),
    {
      architecture: options.architecture ?? hostArchitecture().architecture,
      os: 'linux',
      config: {
        Env: ['PATH=/bin', `FIXTURE=${name}`],
        Cmd: options.cmd ?? ['sh'],
        ExposedPorts: { '8080/tcp': {} },
      },
    },
  );
  return { reference: `${REGISTRY_HOST}/${repository}:${tag}`, digest, manifest };
}

/** A programmable HTTP proxy in front of the anonymous local registry, for failure and auth tests. */
export interface RegistryProxy {
  /** `127.0.0.1:<port>`. */
  host: string;
  /** Requests seen, by method and path (`GET /v2/…`). */
  requests: string[];
  /** Blob digests whose bytes are altered in transit (one byte flipped). */
  corrupt: Set<string>;
  /** Blob digests whose responses never complete (headers and a little data, then a stall). */
  stall: Set<string>;
  /** When set, the proxy demands `Authorization: Bearer <token>` and serves the token at `/token`. */
  bearer?: { username: string; password: string; token: string };
  /** Answer 404 to every manifest request (a search registry that lacks everything). */
  notFound: boolean;
  /** Blob digests answered once with 503 and once with a connection reset mid-body, then served. */
  flaky: Set<string>;
  close(): Promise<void>;
}

/** Starts a `RegistryProxy` on an ephemeral loopback port; over TLS with `tls` (PEM key and certificate). */
export async function startRegistryProxy(
  options: { tls?: { key: string; cert: string } } = {},
): Promise<RegistryProxy> {
  const { createServer: createHttpServer, request } = await import('node:http');
  const { createServer: createHttpsServer } = await import('node:https');
  const createServer = (handler: import('node:http').RequestListener) =>
    options.tls ? createHttpsServer(options.tls, handler) : createHttpServer(handler);
  const sockets = new Set<import('node:net').Socket>();
  const proxy: RegistryProxy = {
    host: '',
    requests: [],
    corrupt: new Set(),
    stall: new Set(),
    flaky: new Set(),
    notFound: false,
    close: () =>
      new Promise((res) => {
        for (const s of sockets) s.destroy();
        server.close(() => res());
      }),
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    proxy.requests.push(`${req.method} ${url.pathname}`);
    const b = proxy.bearer;
    if (b && url.pathname === '/token') {
      const expected = `Basic ${Buffer.from(`${b.username}:${b.password}`).toString('base64')}`;
      if (req.headers.authorization !== expected || !url.searchParams.get('scope')) {
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end('{"errors":[{"code":"UNAUTHORIZED"}]}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: b.token }));
      return;
    }
    if (b && req.headers.authorization !== `Bearer ${b.token}`) {
      const repo = /^\/v2\/(.+)\/(?:manifests|blobs)\//.exec(url.pathname)?.[1] ?? '';
      res.writeHead(401, {
        'content-type': 'application/json',
        'www-authenticate': `Bearer realm="http://${proxy.host}/token",service="seed-test",scope="repository:${repo}:pull"`,
      });
      res.end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
      return;
    }
    if (proxy.notFound && url.pathname.includes('/manifests/')) {
      res
        .writeHead(404, { 'content-type': 'application/json' })
        .end('{"errors":[{"code":"MANIFEST_UNKNOWN"}]}');
      return;
    }
    const digest = /\/blobs\/(sha256:[a-f0-9]{64})$/.exec(url.pathname)?.[1];
    if (digest && proxy.flaky.has(digest) && req.method === 'GET') {
      const seen = proxy.requests.filter((r) => r === `GET ${url.pathname}`).length;
      if (seen === 1) {
        res.writeHead(503, { 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAVAILABLE"}]}');
        return;
      }
      if (seen === 2) {
        res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': '100000000' });
        res.write(Buffer.alloc(1000));
        setTimeout(() => res.destroy(), 20);
        return;
      }
    }
    const up = request(
      {
        host: '127.0.0.1',
        port: 5000,
        path: req.url,
        method: req.method,
        headers: { ...req.headers, host: REGISTRY_HOST },
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        if (digest && proxy.stall.has(digest)) {
          upRes.once('data', (c: Buffer) => res.write(c.subarray(0, 16)));
          return;
        }
        if (digest && proxy.corrupt.has(digest)) {
          let first = true;
          upRes.on('data', (c: Buffer) => {
            if (first && c.length > 20) {
              c = Buffer.from(c);
              c[c.length - 10]! ^= 0xff;
              first = false;
            }
            res.write(c);
          });
          upRes.on('end', () => res.end());
          return;
        }
        upRes.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const addr = server.address() as import('node:net').AddressInfo;
  proxy.host = `127.0.0.1:${addr.port}`;
  return proxy;
}
