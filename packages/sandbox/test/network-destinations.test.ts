/**
 * The host rule of `allowNet` (`src/network/destinations.ts`, `policy.ts`), decided on normalized
 * addresses: IPv4-mapped IPv6 is IPv4, loopback is never a host destination by IP, host-reserved
 * addresses need an exact rule, names are checked as the addresses they resolve to. No boxes.
 */
import assert from 'node:assert/strict';
import { BlockList } from 'node:net';
import { describe, test } from 'node:test';
// internal: destination parsing and admission are tested as units
import {
  admitsAddress,
  allowsHostLoopback,
  canonicalIp,
  normalizeAddress,
  parseAllowNet,
  resolveDestination,
} from '../src/network/index.ts';

const v4 = (address: string) => ({ address, family: 'ipv4' as const });
/** A stand-in for the host's interface addresses: 192.0.2.77 is "the host" in these cases. */
const host = new BlockList();
host.addAddress('192.0.2.77', 'ipv4');

describe('normalized addresses', () => {
  test('IPv4-mapped IPv6 in any spelling is the IPv4 address; IPv6 is canonical', () => {
    for (const ip of ['::ffff:7f00:1', '::FFFF:127.0.0.1', '0:0:0:0:0:ffff:7f00:0001']) {
      assert.deepEqual(normalizeAddress(ip), v4('127.0.0.1'));
    }
    assert.deepEqual(normalizeAddress('0:0:0:0:0:0:0:1'), { address: '::1', family: 'ipv6' });
    assert.deepEqual(normalizeAddress('fe80::1%eth0'), { address: 'fe80::1', family: 'ipv6' });
    assert.equal(normalizeAddress('0x7f.1'), null, 'inet_aton spellings are names, resolved first');
    assert.equal(canonicalIp('::ffff:10.1.2.3'), '10.1.2.3');
  });
});

describe('admitsAddress', () => {
  test('open policy: public addresses yes; loopback, unspecified, link-local, host addresses no', () => {
    const open = parseAllowNet([]);
    assert.equal(admitsAddress(open, v4('93.184.216.34'), host), true);
    for (const ip of [
      '127.0.0.1',
      '127.9.9.9',
      '0.0.0.0',
      '169.254.169.254',
      '192.0.2.77',
      '10.0.2.2',
      '198.18.0.2',
    ]) {
      assert.equal(admitsAddress(open, v4(ip), host), false, ip);
    }
    for (const ip of ['::1', '::', 'fe80::1', '::7f00:1', '64:ff9b::7f00:1', '2002:7f00:1::']) {
      assert.equal(admitsAddress(open, normalizeAddress(ip)!, host), false, ip);
    }
  });

  test('a host address needs an exact rule; a CIDR covering it or 0.0.0.0/0 does not admit it', () => {
    assert.equal(admitsAddress(parseAllowNet(['192.0.2.0/24', '0.0.0.0/0']), v4('192.0.2.77'), host), false);
    assert.equal(admitsAddress(parseAllowNet(['192.0.2.77']), v4('192.0.2.77'), host), true);
    assert.equal(admitsAddress(parseAllowNet(['192.0.2.77/32']), v4('192.0.2.77'), host), true);
    assert.equal(admitsAddress(parseAllowNet(['::ffff:192.0.2.77']), v4('192.0.2.77'), host), true);
    assert.equal(admitsAddress(parseAllowNet(['192.0.2.0/24']), v4('192.0.2.5'), host), true);
    assert.equal(admitsAddress(parseAllowNet(['192.0.2.0/24']), v4('198.51.100.1'), host), false);
  });

  test('loopback in allowNet is the box’s own: never a host destination by IP', () => {
    assert.equal(admitsAddress(parseAllowNet(['127.0.0.1']), v4('127.0.0.1'), host), false);
    assert.equal(admitsAddress(parseAllowNet(['::1']), normalizeAddress('::1')!, host), false);
  });

  test('the host loopback is named by host.sandbox.internal or exactly 10.0.2.2, not by a CIDR', () => {
    assert.equal(allowsHostLoopback(parseAllowNet(['host.sandbox.internal'])), true);
    assert.equal(allowsHostLoopback(parseAllowNet(['*.sandbox.internal'])), true);
    assert.equal(allowsHostLoopback(parseAllowNet(['10.0.2.2'])), true);
    assert.equal(allowsHostLoopback(parseAllowNet(['10.0.2.2/32'])), true);
    assert.equal(allowsHostLoopback(parseAllowNet(['*.internal', '*.sandbox.internal.example'])), false);
    assert.equal(allowsHostLoopback(parseAllowNet(['10.0.2.0/24'])), false);
    assert.equal(allowsHostLoopback(parseAllowNet(['10.0.0.0/8', '127.0.0.1'])), false);
    assert.equal(allowsHostLoopback(parseAllowNet([])), false);
  });
});

describe('resolveDestination', () => {
  const lookup = (table: Record<string, string[]>) => async (name: string) => {
    const found = table[name];
    if (!found) throw new Error('ENOTFOUND');
    return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };

  test('a name is checked as the addresses it resolves to; the first admissible one is dialled', async () => {
    const policy = parseAllowNet(['*.example.test']);
    const dns = lookup({
      'mixed.example.test': ['127.0.0.1', '::ffff:169.254.1.1', '93.184.216.34'],
      'loop.example.test': ['::ffff:7f00:1', '0.0.0.0'],
    });
    assert.equal(await resolveDestination(policy, 'mixed.example.test', dns), '93.184.216.34');
    assert.equal(await resolveDestination(policy, 'loop.example.test', dns), null);
    assert.equal(await resolveDestination(policy, 'other.test', dns), null, 'unlisted name');
    assert.equal(await resolveDestination(policy, 'gone.example.test', dns), null, 'unresolvable');
  });

  test('host.sandbox.internal and 10.0.2.2 (any spelling) map to 127.0.0.1 only when named', async () => {
    const named = parseAllowNet(['host.sandbox.internal']);
    assert.equal(await resolveDestination(named, 'host.sandbox.internal'), '127.0.0.1');
    assert.equal(await resolveDestination(named, '[::ffff:a00:202]'), '127.0.0.1');
    assert.equal(await resolveDestination(parseAllowNet([]), '10.0.2.2'), null);
    assert.equal(await resolveDestination(parseAllowNet([]), '[::ffff:7f00:1]'), null);
  });
});
