/**
 * A Cluster client with `scaleReads: 'slave'` or `'all'` (a read-heavy application's own client) sends the commands
 * Redis flags read-only to replicas. isLocked was a plain EXISTS: it read a replica, behind the primary (replication
 * is asynchronous) and, with that replica frozen, failed after commandTimeout while the lock's primary answered every
 * other call. Every lock call, isLocked included, now reads the primary.
 */
import type { Cluster } from 'ioredis';
import { LockService } from '../../lib';
import { keySlot } from '../../lib/redis/key-slot';
import { RedisCluster } from '../harness/redis-cluster';
import type { RedisProcess } from '../harness/redis-process';
import { pollUntil } from '../unit/core-helpers';

describe('Redis Cluster client with scaleReads', () => {
  let redisCluster: RedisCluster;
  beforeAll(async () => (redisCluster = await RedisCluster.start(3, [], { replicas: 1 })), 60_000);
  afterAll(() => redisCluster?.stop());

  /** The client reads a replica only once its slot table lists one (the replicas joined after the masters). */
  async function knowsReplicas(cluster: Cluster): Promise<boolean> {
    return pollUntil(
      async () => {
        await new Promise<void>((resolve) => cluster.refreshSlotsCache(() => resolve()));
        return (cluster.slots[keySlot('lock:{order:1}')]?.length ?? 0) > 1;
      },
      10_000,
      100,
    );
  }

  it.each(['slave', 'all'] as const)('scaleReads %s: isLocked reads the primary, so a frozen replica changes nothing', async (scaleReads) => {
    const cluster = redisCluster.client({ scaleReads });
    const locks = new LockService({ redis: cluster, commandTimeout: 300 });
    let replica: RedisProcess | undefined;
    try {
      await locks.onModuleInit();
      expect(await knowsReplicas(cluster)).toBe(true);
      const lock = await locks.acquire('order:1');
      const master = await redisCluster.ownerOf(keySlot('lock:{order:1}'));
      replica = await redisCluster.replicaOf(master, master);
      replica!.pause();
      // Each read of 'all' picks the primary or the replica at random: ten tries meet the replica all but surely.
      for (let i = 0; i < 10; i++) expect(await locks.isLocked('order:1')).toBe(true);
      await lock.release();
      for (let i = 0; i < 10; i++) expect(await locks.isLocked('order:1')).toBe(false);
    } finally {
      replica?.resume();
      await locks.close();
      cluster.disconnect();
    }
  });
});
