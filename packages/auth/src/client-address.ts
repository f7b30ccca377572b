/**
 * The client address of a request behind reverse proxies: the per-IP brute-force limits and the audit log
 * read it. Only the peers listed as trusted proxies (`AUTH_TRUSTED_PROXIES`, a list of addresses and CIDR
 * ranges) may name the client: from such a peer the address is taken from `Forwarded` (RFC 7239 §5.2, the
 * `for` parameters) or, without that header, from `X-Forwarded-For`. The hops are read right to left, the
 * nearest first; every hop that is itself a trusted proxy hands over to the one before it, and the first
 * address that is not a trusted proxy is the client (RFC 7239 §8.1: entries added by a client are
 * arbitrary, so only what trusted proxies appended counts). Without trusted proxies, or from any other peer,
 * the client address is the TCP peer address and the headers are ignored.
 */
import { BlockList, isIP } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import parseForwarded from 'forwarded-parse';

/** At most this many hops of a forwarding header are read (the nearest ones); older hops are ignored. */
export const MAX_FORWARDED_HOPS = 32;

/**
 * A set of trusted proxy addresses (IPv4 and IPv6 addresses and CIDR ranges). IPv4-mapped IPv6 addresses
 * (`::ffff:10.0.0.1`, as a dual-stack socket reports IPv4 peers) match the IPv4 entries.
 */
export class TrustedProxies {
  readonly #list = new BlockList();
  /** The entries as given, normalised (`10.0.0.0/8`, `::1/128`). */
  readonly entries: readonly string[];

  /**
   * @param entries addresses (`10.0.0.1`, `::1`) or CIDR ranges (`10.0.0.0/8`, `fd00::/8`).
   * @param field the setting's name for error messages (`AUTH_TRUSTED_PROXIES` or `trustedProxies`).
   * @throws RangeError naming `field` and the entry when an entry is not an address or CIDR range.
   */
  constructor(entries: readonly string[], field = 'trustedProxies') {
    const normalised: string[] = [];
    for (const raw of entries) {
      const entry = raw.trim();
      const slash = entry.indexOf('/');
      const address = slash === -1 ? entry : entry.slice(0, slash);
      const family = isIP(address);
      const max = family === 4 ? 32 : 128;
      const prefixText = slash === -1 ? String(max) : entry.slice(slash + 1);
      const prefix = /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : Number.NaN;
      if (family === 0 || !(prefix >= 0 && prefix <= max)) {
        throw new RangeError(
          `${field}: "${entry}" is not an IP address or CIDR range (e.g. 10.0.0.0/8, 192.168.1.5, fd00::/8)`,
        );
      }
      this.#list.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
      normalised.push(`${address}/${prefix}`);
    }
    this.entries = normalised;
  }

  /**
   * Reads a comma-separated list (`AUTH_TRUSTED_PROXIES`); empty or blank means none.
   * @throws RangeError as the constructor.
   */
  static parse(list: string, field = 'AUTH_TRUSTED_PROXIES'): TrustedProxies {
    return new TrustedProxies(
      list.split(',').filter((e) => e.trim() !== ''),
      field,
    );
  }

  /** True when `address` (an IP address, IPv4-mapped or not) is a trusted proxy. */
  has(address: string): boolean {
    const plain = unmapped(address);
    const family = isIP(plain);
    if (family === 0) return false;
    return this.#list.check(plain, family === 4 ? 'ipv4' : 'ipv6');
  }

  /**
   * The client address of a request from `peer` (the TCP peer address) with `headers`: `peer` itself
   * unless it is a trusted proxy; then the nearest hop of `Forwarded` (or `X-Forwarded-For`) that is not a
   * trusted proxy. A hop that is not an IP address (`unknown`, an obfuscated `_name`, RFC 7239 §6) ends the
   * walk at the proxy that wrote it; a malformed `Forwarded` header is ignored (the peer is the client).
   */
  resolve(peer: string, headers: FastifyRequest['headers']): string {
    let current = unmapped(peer);
    if (this.entries.length === 0 || !this.has(current)) return current;
    const hops = forwardedHops(headers);
    for (let i = hops.length - 1; i >= 0 && i >= hops.length - MAX_FORWARDED_HOPS; i--) {
      const hop = hops[i]!;
      if (isIP(hop) === 0) break;
      current = hop;
      if (!this.has(hop)) break;
    }
    return current;
  }
}

/** `::ffff:a.b.c.d` → `a.b.c.d`; other addresses unchanged. */
function unmapped(address: string): string {
  return address.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/** One `for` node of RFC 7239 §6 (`"[2001:db8::1]:4711"`, `192.0.2.60:80`) → its address. */
function nodeAddress(node: string): string {
  const value = node.trim();
  if (value.startsWith('[')) {
    const end = value.indexOf(']');
    return end === -1 ? value : value.slice(1, end);
  }
  const colon = value.indexOf(':');
  // An IPv4 address with a port; bare IPv6 is not valid in `Forwarded` but is what X-Forwarded-For holds.
  return colon !== -1 && value.indexOf(':', colon + 1) === -1 ? value.slice(0, colon) : value;
}

/** The client-side hops named by the request, oldest first (`Forwarded` when present, else `X-Forwarded-For`). */
function forwardedHops(headers: FastifyRequest['headers']): string[] {
  const forwarded = headers.forwarded;
  if (forwarded !== undefined && forwarded !== '') {
    try {
      return parseForwarded(Array.isArray(forwarded) ? forwarded.join(',') : forwarded).map((element) =>
        element.for === undefined ? '' : unmapped(nodeAddress(element.for)),
      );
    } catch {
      return [];
    }
  }
  const xff = headers['x-forwarded-for'];
  if (xff === undefined) return [];
  return (Array.isArray(xff) ? xff.join(',') : xff).split(',').map((hop) => unmapped(nodeAddress(hop)));
}

declare module 'fastify' {
  interface FastifyRequest {
    /**
     * The client address: the TCP peer, or behind trusted proxies the address they forwarded (see
     * `client-address.ts`). Set by {@link trustProxiesFor}; read it through {@link clientAddress}.
     */
    clientAddress?: string;
  }
}

/**
 * Makes `req.clientAddress` (read through {@link clientAddress}) the forwarded client address for requests
 * from `proxies` on `app` and its plugins; call on the root instance before registering routes.
 */
export function trustProxiesFor(app: FastifyInstance, proxies: TrustedProxies): void {
  app.decorateRequest('clientAddress', {
    getter(this: FastifyRequest) {
      return proxies.resolve(this.socket.remoteAddress ?? '', this.headers);
    },
  });
}

/**
 * The address the per-IP limits and the audit log use for `req`: the one {@link trustProxiesFor} resolved,
 * or Fastify's `req.ip` on an app without it.
 */
export function clientAddress(req: FastifyRequest): string {
  return req.clientAddress ?? req.ip;
}
