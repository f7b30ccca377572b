/**
 * The per-box DNS resolver that enforces `allowNet` at name resolution (RFC 1035 over UDP). Listed
 * names are resolved on the host; before an answer is sent, its addresses are handed to `bind` (the
 * box's firewall admits them), so a hostname rule also admits exactly the IPs it resolved to.
 * Unlisted names get NXDOMAIN at once (fail fast; nothing is sent upstream).
 */
import { createSocket, type Socket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import dnsPacket from 'dns-packet';
import { hostAddresses, isHostReserved } from './destinations.ts';
import {
  type AllowPolicy,
  allowsHostLoopback,
  allowsName,
  HOST_LOOPBACK_IP,
  HOST_LOOPBACK_NAME,
  normalizeHostname,
} from './policy.ts';

/** Options of `startDnsServer`. */
export interface DnsServerOptions {
  policy: AllowPolicy;
  /** Called with the IPv4 addresses of a permitted name (and that name) before they are answered. */
  bind(addresses: string[], name: string): Promise<void>;
  /** Host interface to listen on; default `127.0.0.1` (reached from the box through slirp4netns). */
  host?: string;
  /** UDP port to listen on; default the kernel's choice. */
  port?: number;
}

/** A running resolver. */
export interface DnsServer {
  /** UDP port on the host. */
  port: number;
  /** Replaces the policy: queries answered from now on follow `policy`. */
  setPolicy(policy: AllowPolicy): void;
  close(): Promise<void>;
}

const TTL_SECONDS = 30;

/**
 * Resolves a permitted name to IPv4 addresses on the host (`host.sandbox.internal` → 10.0.2.2, only
 * when `allowNet` names the host's loopback).
 */
async function resolve4(name: string, policy: AllowPolicy): Promise<string[]> {
  if (name === HOST_LOOPBACK_NAME) return allowsHostLoopback(policy) ? [HOST_LOOPBACK_IP] : [];
  try {
    const found = await lookup(name, { all: true, family: 4 });
    // A name never admits a host-reserved address (loopback, link-local, the box networks, the host's
    // own addresses: `destinations.ts`), so DNS cannot rebind a box onto the host; only
    // `host.sandbox.internal` maps to the host (its loopback).
    const host = hostAddresses();
    return [...new Set(found.map((a) => a.address))].filter(
      (a) => !isHostReserved({ address: a, family: 'ipv4' }, host),
    );
  } catch {
    return [];
  }
}

/** Builds the reply to one query packet. */
async function answer(query: dnsPacket.Packet, options: DnsServerOptions): Promise<Buffer> {
  const questions = query.questions ?? [];
  const reply: dnsPacket.Packet = {
    id: query.id ?? 0,
    type: 'response',
    flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
    questions,
    answers: [],
  };
  const question = questions[0];
  // RCODE lives in the low 4 bits of the flags (RFC 1035 §4.1.1): 1 FORMERR, 3 NXDOMAIN.
  const fail = (rcode: number) => dnsPacket.encode({ ...reply, flags: (reply.flags ?? 0) | rcode });
  if (!question) return fail(1);
  const name = normalizeHostname(question.name);
  if (!allowsName(options.policy, name)) return fail(3);
  if (question.type === 'A') {
    const addresses = await resolve4(name, options.policy);
    if (addresses.length === 0) return fail(3);
    await options.bind(addresses, name);
    reply.answers = addresses.map((data) => ({
      type: 'A',
      class: 'IN',
      name: question.name,
      ttl: TTL_SECONDS,
      data,
    }));
  }
  // Other types (AAAA included: boxes have no IPv6 route) get an empty NOERROR answer.
  return dnsPacket.encode(reply);
}

/**
 * Starts a resolver on `options.port` (default an ephemeral UDP port).
 * @throws Error when the port cannot be bound (EADDRINUSE when it is taken).
 */
export function startDnsServer(input: DnsServerOptions): Promise<DnsServer> {
  const options = { ...input };
  const socket: Socket = createSocket('udp4');
  socket.on('message', (msg, rinfo) => {
    let query: dnsPacket.Packet;
    try {
      query = dnsPacket.decode(msg);
    } catch {
      return; // not DNS: dropped
    }
    answer(query, options)
      // SERVFAIL (2) when the host side fails (e.g. the firewall could not admit the addresses).
      .catch(() =>
        dnsPacket.encode({ id: query.id ?? 0, type: 'response', flags: 2, questions: query.questions }),
      )
      .then((buf) => socket.send(buf, rinfo.port, rinfo.address));
  });
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      socket.off('error', reject);
      socket.on('error', () => {});
      socket.unref();
      resolve({
        port: socket.address().port,
        setPolicy: (policy) => {
          options.policy = policy;
        },
        close: () => new Promise((r) => socket.close(() => r())),
      });
    });
  });
}
