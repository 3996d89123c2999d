/**
 * Many lock calls at once leave in few socket writes of at most 32 commands
 * (lib/redis/write-batcher.ts), on one Redis and on each Redlock node; a lone call is written at once. Writes are counted where Node hands them to the socket (`_write` for one chunk,
 * `_writev` for a batch), on the service's own connection.
 */
import type Redis from 'ioredis';
import type { RedisLockStore } from '../../lib/redis/redis-lock-store';
import { LockService } from '../../lib';
import type { RedlockStore } from '../../lib/redis/redlock/redlock-store';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { RedlockNodes } from '../harness/redlock-nodes';
import { countSocketWrites } from '../harness/socket-writes';
import { ServicePool } from './core-helpers';

/** Counts what reaches `client`'s socket from now on (default: the service's connection). */
function countWrites(service: LockService, client = (service.engine.store as RedisLockStore).client as Redis): ReturnType<typeof countSocketWrites> {
  return countSocketWrites(client.stream);
}

describe('write batching', () => {
  let redis: SharedRedis;
  const pool = new ServicePool(() => redis.url);

  beforeAll(async () => {
    redis = await RedisProcess.shared();
  });
  afterEach(() => pool.closeAll());
  afterAll(() => redis.stop());

  it('a lone acquire and release are written at once, one write each', async () => {
    const locks = await pool.make();
    await (await locks.acquire('batch:warm')).release(); // first use sends the scripts in full
    const { counted, stop } = countWrites(locks);
    const lock = await locks.acquire('batch:lone');
    await lock.release();
    stop();
    expect(counted).toEqual({ flushes: 2, chunks: 2, scripts: 2, largest: 1 });
  });

  it('64 locks taken and released at once leave in a few batched writes, and every one worked', async () => {
    const locks = await pool.make();
    await (await locks.acquire('batch:warm')).release();
    const { counted, stop } = countWrites(locks);
    const keys = Array.from({ length: 64 }, (_, i) => `batch:${i}`);
    const held = await Promise.all(keys.map((k) => locks.acquire(k)));
    const released = await Promise.all(held.map((l) => l.release()));
    stop();
    expect(released.every(Boolean)).toBe(true);
    expect(held.map((l) => l.key)).toEqual(keys);
    expect(counted.chunks).toBe(128);
    // The first acquire goes out alone (nothing in flight yet); the rest of each burst rides along,
    // at most 32 commands per write so Redis can start on a batch while the next one is built.
    expect(counted.flushes).toBeLessThanOrEqual(10);
    expect(counted.largest).toBe(32);
  });

  it('Redlock: 64 locks at once leave each node in a few batched writes (the old code wrote every command alone: 128 per node)', async () => {
    const nodes = await RedlockNodes.start(3);
    const locks = new LockService({ nodes: nodes.urls, nodeRecoveryDelay: 0 });
    try {
      await locks.onModuleInit();
      await (await locks.acquire('batch:warm')).release();
      const counters = (locks.engine.store as RedlockStore).nodes.map((node) => countWrites(locks, node.client as Redis));
      const keys = Array.from({ length: 64 }, (_, i) => `batch:${i}`);
      const held = await Promise.all(keys.map((k) => locks.acquire(k)));
      const released = await Promise.all(held.map((l) => l.release()));
      counters.forEach((c) => c.stop());
      expect(released.every(Boolean)).toBe(true);
      for (const { counted } of counters) {
        // 64 acquires and 64 releases. A node may also get a startup check's INFO (eviction warning, sent without
        // awaiting once the node is up: a loaded clean-clone run counted 129 chunks on one node), which is no lock call.
        expect(counted.scripts).toBe(128);
        expect(counted.chunks - counted.scripts).toBeLessThanOrEqual(3);
        expect(counted.flushes).toBeLessThanOrEqual(10);
        expect(counted.largest).toBeGreaterThanOrEqual(32);
        expect(counted.largest).toBeLessThanOrEqual(32 + counted.chunks - counted.scripts);
      }
    } finally {
      await locks.close();
      await nodes.stop();
    }
  });
});
