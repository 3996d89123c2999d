import type { Cluster } from 'ioredis';
import { LockService } from '../../lib';
import { RedisCluster } from '../harness/redis-cluster';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Three cluster masters on loopback. Proves every script of one key stays in one slot (no CROSSSLOT),
 * multi-key locks across slots work, and the watchdog renews through the Cluster client.
 */
describe('Redis Cluster', () => {
  let redisCluster: RedisCluster;
  let cluster: Cluster;
  let locks: LockService;

  beforeAll(async () => {
    redisCluster = await RedisCluster.start(3);
    cluster = redisCluster.client();
    locks = new LockService({ redis: cluster, ttl: 600, commandTimeout: 1_000 });
    await locks.onModuleInit();
  }, 30_000);

  afterAll(async () => {
    await locks?.close();
    await redisCluster?.stop();
  });

  it('locks keys living in different slots, renews them and hands them over with no CROSSSLOT error', async () => {
    const keys = ['acct:1', 'acct:2', 'acct:3', 'order:99'];
    const slots = new Set(await Promise.all(keys.map((k) => cluster.call('CLUSTER', 'KEYSLOT', `lock:{${k}}`))));
    expect(slots.size).toBeGreaterThan(1);

    const lock = await locks.acquire(keys);
    expect(lock.keys).toEqual([...keys].sort());
    await sleep(1_500); // 2.5 × ttl: only the watchdog keeps these alive
    expect(lock.isHeld()).toBe(true);
    for (const k of keys) expect(await cluster.get(`lock:{${k}}`)).toBe(lock.token);
    expect(locks.getStats().renewals).toBeGreaterThanOrEqual(keys.length * 3);

    const waiting = locks.acquire('acct:2', { waitTimeout: 2_000 });
    await sleep(50);
    expect(await lock.release()).toBe(true);
    const next = await waiting;
    expect(next.fencingToken).toBeGreaterThan(lock.fencingTokens.get('acct:2')!);
    expect(await next.release()).toBe(true);
    expect(locks.getStats().lost).toBe(0);
  });
});
