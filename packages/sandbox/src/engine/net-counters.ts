/**
 * Network counters of a box's network namespace, read from the host through a process in it
 * (`/proc/<pid>/net/dev` and `/proc/<pid>/net/snmp`). One reader for every engine (crun, gVisor,
 * rootless), which all report them in `EngineStats`.
 */
import { readFile } from 'node:fs/promises';
import type { EngineStats } from './types.ts';

/** The network fields of `EngineStats`. */
export type NetworkCounters = Pick<
  EngineStats,
  'networkBytesReceived' | 'networkBytesSent' | 'networkTcpConnections' | 'networkTcpErrors'
>;

/**
 * Bytes received and sent on every interface but `lo` (bytes), current TCP connections and TCP errors
 * (`AttemptFails` + `EstabResets`, the RFC 4022 MIB names as the kernel prints them) of the network
 * namespace of process `pid`. A file that cannot be read (the process is gone) leaves its fields out;
 * never throws.
 */
export async function readNetworkCounters(pid: number): Promise<NetworkCounters> {
  const out: NetworkCounters = {};
  const read = (file: string) => readFile(file, 'utf8').catch(() => undefined);
  const dev = await read(`/proc/${pid}/net/dev`);
  if (dev !== undefined) {
    let rx = 0;
    let tx = 0;
    for (const line of dev.split('\n').slice(2)) {
      const [ifname, rest] = line.split(':');
      if (!rest || ifname?.trim() === 'lo') continue;
      const f = rest.trim().split(/\s+/).map(Number);
      rx += f[0] ?? 0;
      tx += f[8] ?? 0;
    }
    out.networkBytesReceived = rx;
    out.networkBytesSent = tx;
  }
  const tcp = (await read(`/proc/${pid}/net/snmp`))?.split('\n').filter((line) => line.startsWith('Tcp:'));
  if (tcp && tcp.length >= 2) {
    const names = tcp[0]!.split(/\s+/);
    const values = tcp[1]!.split(/\s+/).map(Number);
    const field = (name: string) => values[names.indexOf(name)] ?? 0;
    out.networkTcpConnections = field('CurrEstab');
    out.networkTcpErrors = field('AttemptFails') + field('EstabResets');
  }
  return out;
}
