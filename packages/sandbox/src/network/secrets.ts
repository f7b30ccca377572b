/**
 * Secret substitution for outbound HTTP(S) (spec 002 `Secret`): a per-box forward proxy on the host
 * (reached from the box as `http://10.0.2.2:3128`, see `secretsEnv`). For a host that a secret
 * names (every host when its `hosts` is empty), `CONNECT` is answered by terminating TLS with a
 * certificate issued on the fly by the box's own CA (RSA 2048, SHA-256, 1 day; the CA keys stay on the
 * host — in the network helper's memory and state file, `helper.ts` — the box gets the CA certificate
 * in its trust store); the decrypted request has every placeholder in its URL, header values and body
 * replaced by the real value and is sent upstream over verified TLS (system roots,
 * `NODE_EXTRA_CA_CERTS`). Other allowed destinations are tunnelled unchanged. Real values are never
 * logged or returned. `allowNet` and the host rule are enforced here too (`resolveDestination`:
 * decided on the resolved, normalized address, which is the one dialled): refused destinations get
 * `403`; `setPolicy` applies a new `allowNet` to new requests and closes open connections it refuses.
 */
import { createPublicKey, generateKeyPair, type KeyObject, randomBytes } from 'node:crypto';
import {
  request as httpRequest,
  createServer as httpServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect, isIP, type Socket } from 'node:net';
import { createSecureContext, type SecureContext, TLSSocket } from 'node:tls';
import { promisify } from 'node:util';
import forge from 'node-forge';
import { type Lookup, resolveDestination } from './destinations.ts';
import { type AllowPolicy, normalizeHostname } from './policy.ts';

/** A secret rule as the proxy needs it. */
export interface ProxySecret {
  name: string;
  value: string;
  hosts: string[];
  placeholder: string;
}

/** A running proxy. */
export interface SecretsProxy {
  /** TCP port on the host's 127.0.0.1. */
  port: number;
  /** The box CA certificate (PEM) to install in the box's trust store. */
  caPem: string;
  /** The CA's keys and certificate, to start the same proxy again (`startSecretsProxy({ ca })`). */
  ca: ProxyCaMaterial;
  /**
   * Replaces the `allowNet` policy for new requests and closes every open tunnel and intercepted
   * connection whose destination the new policy refuses (decided as for a new one:
   * `resolveDestination`). Resolves once they are closed.
   */
  setPolicy(policy: AllowPolicy): Promise<void>;
  close(): Promise<void>;
}

/**
 * A box CA's secret material (PEM): the CA private key (PKCS#1), its self-signed certificate and the
 * private key shared by the leaf certificates it issues. Secret: whoever holds it can impersonate any
 * host to the box.
 */
export interface ProxyCaMaterial {
  keyPem: string;
  certPem: string;
  leafKeyPem: string;
}

/** Largest request body that is buffered for substitution, bytes (larger: 413). */
export const MAX_BODY_BYTES = 32 * 1024 * 1024;

interface Target {
  host: string;
  port: number;
  tls: boolean;
}

interface RsaPair {
  publicKey: KeyObject;
  privateKey: KeyObject;
}
const generateRsa = promisify(generateKeyPair) as (
  type: 'rsa',
  options: { modulusLength: number },
) => Promise<RsaPair>;

/** The box's certificate authority: a key pair and self-signed certificate, issuing leaf certificates. */
class BoxCa {
  readonly #key: forge.pki.rsa.PrivateKey;
  readonly #cert: forge.pki.Certificate;
  readonly #leafKeyPem: string;
  readonly #leafPublic: forge.pki.rsa.PublicKey;
  readonly #contexts = new Map<string, SecureContext>();
  readonly pem: string;

  /** Generates the CA and leaf key pairs in parallel (off the event loop), then the CA certificate. */
  static async create(boxLabel: string): Promise<BoxCa> {
    const rsa = () => generateRsa('rsa', { modulusLength: 2048 });
    const [ca, leaf] = await Promise.all([rsa(), rsa()]);
    return new BoxCa(boxLabel, ca, leaf);
  }

  /** The CA of `material` (from `keys` of an earlier CA): same certificate, same keys. */
  static restore(material: ProxyCaMaterial): BoxCa {
    return new BoxCa('', null, null, material);
  }

  private constructor(
    boxLabel: string,
    ca: RsaPair | null,
    leaf: RsaPair | null,
    material?: ProxyCaMaterial,
  ) {
    if (material) {
      this.#key = forge.pki.privateKeyFromPem(material.keyPem);
      this.#cert = forge.pki.certificateFromPem(material.certPem);
      this.pem = material.certPem;
      this.#leafKeyPem = material.leafKeyPem;
      this.#leafPublic = forge.pki.publicKeyFromPem(
        createPublicKey(material.leafKeyPem).export({ type: 'spki', format: 'pem' }).toString(),
      ) as forge.pki.rsa.PublicKey;
      return;
    }
    if (!ca || !leaf) throw new TypeError('BoxCa needs key pairs or material');
    this.#key = forge.pki.privateKeyFromPem(
      ca.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(),
    );
    const cert = forge.pki.createCertificate();
    cert.publicKey = forge.pki.publicKeyFromPem(
      ca.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    );
    cert.serialNumber = serial();
    cert.validity.notBefore = new Date(Date.now() - 3600_000);
    cert.validity.notAfter = new Date(Date.now() + 365 * 86400_000);
    const subject = [
      { name: 'commonName', value: `Sandbox box CA ${boxLabel}` },
      { name: 'organizationName', value: 'seed sandbox' },
    ];
    cert.setSubject(subject);
    cert.setIssuer(subject);
    cert.setExtensions([
      { name: 'basicConstraints', cA: true, pathLenConstraint: 0, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    cert.sign(this.#key, forge.md.sha256.create());
    this.#cert = cert;
    this.pem = forge.pki.certificateToPem(cert);
    this.#leafKeyPem = leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    this.#leafPublic = forge.pki.publicKeyFromPem(
      leaf.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    ) as forge.pki.rsa.PublicKey;
  }

  /** The CA's keys and certificate (PEM), for `restore`. */
  material(): ProxyCaMaterial {
    return { keyPem: forge.pki.privateKeyToPem(this.#key), certPem: this.pem, leafKeyPem: this.#leafKeyPem };
  }

  /** TLS context presenting a certificate for `host` (a name or an IP), cached per host. */
  context(host: string): SecureContext {
    const cached = this.#contexts.get(host);
    if (cached) return cached;
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.#leafPublic;
    cert.serialNumber = serial();
    cert.validity.notBefore = new Date(Date.now() - 3600_000);
    cert.validity.notAfter = new Date(Date.now() + 86400_000);
    cert.setSubject([{ name: 'commonName', value: host.slice(0, 64) }]);
    cert.setIssuer(this.#cert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [isIP(host) ? { type: 7, ip: host } : { type: 2, value: host }] },
      { name: 'subjectKeyIdentifier' },
      { name: 'authorityKeyIdentifier', keyIdentifier: this.#cert.generateSubjectKeyIdentifier().getBytes() },
    ]);
    cert.sign(this.#key, forge.md.sha256.create());
    const context = createSecureContext({
      key: this.#leafKeyPem,
      cert: `${forge.pki.certificateToPem(cert)}${this.pem}`,
    });
    this.#contexts.set(host, context);
    return context;
  }
}

/** A positive 128-bit serial number (hex, high bit clear). */
function serial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f;
  return bytes.toString('hex');
}

function hostMatches(pattern: string, host: string): boolean {
  const p = normalizeHostname(pattern);
  return p.startsWith('*.') ? host.endsWith(p.slice(1)) : p === host;
}

/** Replaces every placeholder of `secrets` in `text`. */
function substitute(text: string, secrets: readonly ProxySecret[]): string {
  let out = text;
  for (const s of secrets) out = out.split(s.placeholder).join(s.value);
  return out;
}

/**
 * Starts the proxy of one box.
 * @param options.policy the box's `allowNet`; @param options.secrets its secret rules.
 * @param options.ca the CA of an earlier run (`SecretsProxy.ca`); default a new one.
 * @param options.port TCP port to listen on (127.0.0.1); default the kernel's choice.
 * @throws Error when the port cannot be bound (EADDRINUSE when it is taken).
 */
export async function startSecretsProxy(options: {
  policy: AllowPolicy;
  secrets: readonly ProxySecret[];
  label?: string;
  ca?: ProxyCaMaterial;
  port?: number;
  /** Name resolution of upstream hosts; default the host's resolver (`dns.lookup`, all addresses). */
  lookup?: Lookup;
}): Promise<SecretsProxy> {
  let policy = options.policy;
  const secrets = options.secrets.map((s) => ({ ...s }));
  const ca = options.ca
    ? BoxCa.restore(options.ca)
    : await BoxCa.create(options.label ?? randomBytes(4).toString('hex'));
  const targets = new WeakMap<Socket, Target>();
  /** Open client connections of this proxy and the host each one is for (CONNECT or plain request). */
  const open = new Map<Socket, string>();
  const track = (socket: Socket, host: string) => {
    open.set(socket, host);
    socket.once('close', () => open.delete(socket));
  };

  const secretsFor = (host: string) =>
    secrets.filter((s) => s.hosts.length === 0 || s.hosts.some((h) => hostMatches(h, host)));

  const fail = (res: ServerResponse, status: number, message: string) => {
    if (res.headersSent) return void res.destroy();
    res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' });
    res.end(`${message}\n`);
  };

  /** Forwards one (decrypted or plain) request to its target with placeholders substituted. */
  const forward = async (req: IncomingMessage, res: ServerResponse, target: Target) => {
    const address = await resolveDestination(policy, target.host, options.lookup);
    if (address === null) return fail(res, 403, `sandbox: ${target.host} is not allowed by allowNet`);
    const applicable = secretsFor(normalizeHostname(target.host));
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return fail(res, 413, `sandbox: request body over ${MAX_BODY_BYTES} bytes`);
      chunks.push(chunk);
    }
    let body = Buffer.concat(chunks);
    let path = req.url ?? '/';
    if (/^https?:\/\//i.test(path)) {
      const url = new URL(path);
      path = `${url.pathname}${url.search}`;
    }
    const headers: IncomingHttpHeaders = {};
    for (const [key, value] of Object.entries(req.headers)) {
      if (key.startsWith('proxy-') || key === 'connection' || key === 'keep-alive' || value === undefined)
        continue;
      headers[key] = Array.isArray(value)
        ? value.map((v) => substitute(v, applicable))
        : substitute(value, applicable);
    }
    if (applicable.length > 0) {
      path = substitute(path, applicable);
      if (body.length > 0) body = Buffer.from(substitute(body.toString('latin1'), applicable), 'latin1');
    }
    delete headers['transfer-encoding'];
    if (body.length > 0 || req.headers['content-length'] !== undefined)
      headers['content-length'] = String(body.length);
    const send = target.tls ? httpsRequest : httpRequest;
    const upstream = send({
      host: address,
      port: target.port,
      method: req.method,
      path,
      headers,
      ...(target.tls ? { servername: isIP(target.host) ? undefined : normalizeHostname(target.host) } : {}),
    });
    upstream.on('response', (up) => {
      res.writeHead(up.statusCode ?? 502, up.statusMessage, up.headers);
      up.pipe(res);
    });
    upstream.on('error', (error) =>
      fail(res, 502, `sandbox: upstream ${target.host}:${target.port} failed: ${error.message}`),
    );
    upstream.end(body);
  };

  const intercept: Server = httpServer((req, res) => {
    const target = targets.get(req.socket);
    if (!target) return fail(res, 400, 'sandbox: unknown tunnel');
    forward(req, res, target).catch((error) => fail(res, 502, `sandbox: ${(error as Error).message}`));
  });

  const proxy: Server = httpServer((req, res) => {
    // Plain HTTP through the proxy: absolute-form request target (RFC 9112 §3.2.2).
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return fail(res, 400, 'sandbox: proxy requests need an absolute http:// URL');
    }
    if (url.protocol !== 'http:')
      return fail(res, 400, 'sandbox: only http:// URLs are proxied; use CONNECT for https');
    const target = { host: url.hostname, port: Number(url.port || 80), tls: false };
    track(req.socket, normalizeHostname(url.hostname.replace(/^\[|\]$/g, '')));
    forward(req, res, target).catch((error) => fail(res, 502, `sandbox: ${(error as Error).message}`));
  });

  proxy.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    client.on('error', () => {});
    const match = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? '');
    const port = Number(match?.[2]);
    if (!match || !(port > 0 && port < 65536)) {
      client.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const host = normalizeHostname(match[1]!.replace(/^\[|\]$/g, ''));
    track(client, host);
    resolveDestination(policy, host, options.lookup).then((address) => {
      if (address === null) {
        client.end('HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\n\r\nnot allowed by allowNet\n');
        return;
      }
      if (secretsFor(host).length > 0) {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) client.unshift(head);
        const tls = new TLSSocket(client, { isServer: true, secureContext: ca.context(host) });
        tls.on('error', () => tls.destroy());
        targets.set(tls, { host, port, tls: true });
        intercept.emit('connection', tls);
        return;
      }
      const upstream = connect(port, address);
      upstream.on('error', () => client.destroy());
      client.once('close', () => upstream.destroy());
      upstream.on('connect', () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length > 0) upstream.write(head);
        upstream.pipe(client);
        client.pipe(upstream);
      });
    });
  });
  proxy.on('clientError', (_error, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    proxy.once('error', reject);
    proxy.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  proxy.unref();
  const { port } = proxy.address() as { port: number };
  return {
    port,
    caPem: ca.pem,
    ca: ca.material(),
    setPolicy: async (next) => {
      policy = next;
      const checks = [...open].map(async ([socket, host]) => {
        if ((await resolveDestination(next, host, options.lookup)) === null) socket.destroy();
      });
      await Promise.all(checks);
    },
    close: () =>
      new Promise<void>((resolve) => {
        proxy.closeAllConnections();
        intercept.closeAllConnections();
        proxy.close(() => resolve());
      }),
  };
}
