/**
 * Host-side probes of the network escape tests: a TCP and a UDP listener on every address of the
 * host (dual-stack `::`, so the loopback and every interface address), each counting what it
 * receives. A test asserts they stayed untouched after each attack; `reset()` clears the counts
 * after a control case that is meant to reach them.
 */
import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

/** The listeners and what they received. */
export interface HostListeners {
  /** Port of both listeners (TCP and UDP share the number). */
  port: number;
  /** Connections accepted by the TCP listener. */
  tcp: () => number;
  /** Datagrams received by the UDP listener. */
  udp: () => number;
  /** Fails the test when either listener received anything. */
  assertUntouched: (what?: string) => void;
  /** Forgets what was received (after a control case). */
  reset: () => void;
  close: () => Promise<void>;
}

/** Opens the listeners on a port free for both TCP and UDP (kernel-chosen, retried when UDP clashes). */
export async function hostListeners(): Promise<HostListeners> {
  let tcp = 0;
  let udp = 0;
  for (let attempt = 0; ; attempt++) {
    const server = createServer((socket) => {
      tcp++;
      socket.end('host reached\n');
    });
    await new Promise<void>((resolve) => server.listen({ port: 0, host: '::', ipv6Only: false }, resolve));
    const port = (server.address() as { port: number }).port;
    const dgram = createSocket({ type: 'udp6', ipv6Only: false });
    dgram.on('message', () => {
      udp++;
    });
    const bound = await new Promise<boolean>((resolve) => {
      dgram.once('error', () => resolve(false));
      dgram.bind(port, '::', () => resolve(true));
    });
    if (!bound) {
      server.close();
      dgram.close();
      if (attempt > 8) throw new Error('no port free for both TCP and UDP');
      continue;
    }
    return {
      port,
      tcp: () => tcp,
      udp: () => udp,
      assertUntouched: (what = 'the attack') => {
        assert.equal(tcp, 0, `a host TCP listener accepted ${tcp} connection(s) after ${what}`);
        assert.equal(udp, 0, `a host UDP listener received ${udp} datagram(s) after ${what}`);
      },
      reset: () => {
        tcp = 0;
        udp = 0;
      },
      close: async () => {
        dgram.close();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      },
    };
  }
}
