/**
 * Redlock option validation: every bad `nodes` input is refused when the LockService is built,
 * before any connection is made, with a LockOptionsError that names the option and what to do.
 */
import Redis, { Cluster } from 'ioredis';
import { DistributedLockModuleOptions, LockOptionsError, LockService } from '../../lib';
import { redlockNodeTimeout } from '../../lib/redis/redlock';

const three = ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379', 'redis://10.0.0.3:6379'];

function refusal(options: unknown): LockOptionsError {
  try {
    new LockService(options as DistributedLockModuleOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(LockOptionsError);
    return error as LockOptionsError;
  }
  throw new Error('expected a LockOptionsError');
}

describe('Redlock options (nodes)', () => {
  it.each([
    ['an even number', { nodes: three.concat('redis://10.0.0.4:6379') }, 'nodes', /odd number.*got 4.*add or remove one/],
    ['two nodes', { nodes: three.slice(0, 2) }, 'nodes', /got 2.*Fewer than 3.*redis option/],
    ['one node', { nodes: three.slice(0, 1) }, 'nodes', /got 1/],
    ['no nodes', { nodes: [] }, 'nodes', /got 0/],
    ['not an array', { nodes: 'redis://10.0.0.1:6379' }, 'nodes', /expected an array/],
    ['both redis and nodes', { redis: 'redis://10.0.0.9:6379', nodes: three }, 'nodes', /cannot be given together with 'redis'.*not both/],
    ['a non-URL entry', { nodes: [three[0], three[1], 42] }, 'nodes[2]', /expected a redis:\/\/ URL/],
    ['a URL of another scheme', { nodes: [three[0], three[1], 'http://10.0.0.3'] }, 'nodes[2]', /scheme "http:"/],
    ['a port alone (localhost on every instance)', { nodes: [three[0], three[1], '6379'] }, 'nodes[2]', /names only a port/],
    [
      'the same server twice (host:port without a scheme vs URL)',
      { nodes: [three[0], three[1], '10.0.0.1:6379'] },
      'nodes[2]',
      /points to 10\.0\.0\.1:6379, like nodes\[0\]/,
    ],
    [
      'the same server twice (URL)',
      { nodes: [three[0], three[1], 'redis://10.0.0.1'] },
      'nodes[2]',
      /points to 10\.0\.0\.1:6379, like nodes\[0\].*majority of one/,
    ],
    [
      'the same server twice (options vs URL, localhost)',
      { nodes: ['redis://localhost:7001', { host: '127.0.0.1', port: 7001 }, three[2]] },
      'nodes[1]',
      /127\.0\.0\.1:7001, like nodes\[0\]/,
    ],
    ['replicaAcks', { nodes: three, replicaAcks: 1 }, 'replicaAcks', /not supported with nodes/],
    ['defer', { nodes: three, defer: {} }, 'defer', /not supported with nodes/],
    [
      'nodeRecoveryDelay below the ttl',
      { nodes: three, ttl: 10_000, nodeRecoveryDelay: 5_000 },
      'nodeRecoveryDelay',
      /at least the ttl \(10000 ms\)/,
    ],
    [
      'nodeRecoveryDelay below the module minHold (a release before minHold keeps the key that long)',
      { nodes: three, ttl: 1_000, minHold: 60_000, nodeRecoveryDelay: 1_000 },
      'nodeRecoveryDelay',
      /at least the minHold \(60000 ms\)/,
    ],
    ['ioredis options naming no server (ioredis would use localhost)', { nodes: [three[0], three[1], {}] }, 'nodes[2]', /names no server/],
    ['Sentinel options without sentinels', { nodes: [three[0], three[1], { sentinels: 'x', name: 'm' }] }, 'nodes[2].sentinels', /non-empty array/],
    ['nodeRecoveryDelay not a number', { nodes: three, nodeRecoveryDelay: 'long' }, 'nodeRecoveryDelay', /integer number of milliseconds/],
  ])('refuses %s', (_name, options, option, message) => {
    const error = refusal(options);
    expect(error.option).toBe(option);
    expect(error.message).toMatch(message);
  });

  it('refuses a Redis Cluster client as a node (its masters shard keys, they are not independent)', async () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    try {
      const error = refusal({ nodes: [three[0], three[1], cluster] });
      expect(error.option).toBe('nodes[2]');
      expect(error.message).toMatch(/Redis Cluster client.*Pass the Cluster as 'redis'/);
    } finally {
      cluster.disconnect();
    }
  });

  it('tells Redlock nodes found through Sentinels apart by primary name (the same Sentinels may watch several)', () => {
    const sentinels = [{ host: '10.0.0.8', port: 26379 }];
    const nodes = ['m1', 'm2', 'm3'].map((name) => ({ sentinels, name, lazyConnect: true }));
    const service = new LockService({ nodes, requireRedisAtStartup: false });
    void service.close();
    expect(refusal({ nodes: [nodes[0], nodes[1], { sentinels, name: 'm1' }] }).message).toMatch(
      /m1 via Sentinels 10\.0\.0\.8:26379, like nodes\[0\]/,
    );
  });

  it('refuses two clients of one server', () => {
    const a = new Redis({ host: '127.0.0.1', port: 7010, lazyConnect: true });
    const b = new Redis({ host: 'localhost', port: 7010, lazyConnect: true });
    try {
      const error = refusal({ nodes: [a, three[1], b] });
      expect(error.option).toBe('nodes[2]');
    } finally {
      a.disconnect();
      b.disconnect();
    }
  });

  it('bounds each node call by min(commandTimeout, ttl / 10)', () => {
    expect(redlockNodeTimeout(2_000, 30_000)).toBe(2_000);
    expect(redlockNodeTimeout(2_000, 3_000)).toBe(300);
    expect(redlockNodeTimeout(2_000, 10)).toBe(1);
  });
});
