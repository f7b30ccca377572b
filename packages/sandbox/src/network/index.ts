/** Networking of local boxes (spec 002): user-mode networking, allowNet, ports, tunnels, secrets. */

export type { BoxNetworkConfig, PortRequest, SecretRule } from './box-networking.ts';
export {
  type Address,
  admitsAddress,
  BOX_CIDR,
  hostAddresses,
  isHostReserved,
  type Lookup,
  normalizeAddress,
  resolveDestination,
  SLIRP_CIDR,
} from './destinations.ts';
export { type DnsServer, startDnsServer } from './dns.ts';
export { BOX_CA_PATH, BoxNetworking, PROXY_GUEST_PORT, secretsEnv } from './manager.ts';
export { GUEST_IP, SLIRP_DNS_IP } from './netns.ts';
export * from './policy.ts';
export { MAX_BODY_BYTES, type SecretsProxy, startSecretsProxy } from './secrets.ts';
export { type BoxPidResolver, LocalNetworkHandle } from './tunnel.ts';
export { DEFAULT_READ_BYTES } from './tunnel-shared.ts';
