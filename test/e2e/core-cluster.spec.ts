import type { Cluster } from 'ioredis';
import { LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { RedisCluster } from '../harness/redis-cluster';
import { redisKeySlot } from '../harness/redis-key-slot';
import { countSocketWrites } from '../harness/socket-writes';

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

  // Braces decide a Cluster slot, so a key that closes or empties the hash tag (`}x` made `lock:{}x}`)
  // used to scatter one lock's names over several slots: every script on it failed.
  it('locks keys containing braces and percent signs: one slot per lock, waiting and handover work, look-alikes stay apart', async () => {
    const keys = ['}x', '{}', 'a}b{c', '%7D', '}', '%', '%25', '{', '}}', '{x}', 'x}:f'];
    for (const key of keys) {
      const lock = await locks.acquire(key);
      const k = lockRedisKeys('lock:', key);
      expect(await cluster.get(k.lock)).toBe(lock.token);
      const names = [k.lock, k.fence, k.queue, k.waiters];
      const slots = await Promise.all(names.map((name) => cluster.call('CLUSTER', 'KEYSLOT', name)));
      expect({ key, slots: new Set(slots).size }).toEqual({ key, slots: 1 });
      expect(slots[0]).toBe(redisKeySlot(k.lock)); // the harness' oracle agrees with the server
      const waiting = locks.acquire(key, { waitTimeout: 2_000 });
      await sleep(30);
      expect(await lock.release()).toBe(true);
      const next = await waiting;
      expect(next.fencingToken).toBeGreaterThan(lock.fencingToken);
      expect(await next.release()).toBe(true);
    }
    // A key and its escaped spelling are two locks, held at the same time.
    const held = await Promise.all(keys.map((key) => locks.acquire(key, { onBusy: 'throw' })));
    expect(await Promise.all(held.map((l) => l.release()))).toEqual(keys.map(() => true));
    expect(locks.getStats().lost).toBe(0);
  });
  // Unbatched, every command was a write system call of its own on its master's socket, and a read and a write
  // of the master's: 64 locks at once cost each master twice as many system calls as a batched single server.
  it('64 locks taken and released at once leave in batched writes on each master, and every one worked', async () => {
    const keys = Array.from({ length: 64 }, (_, i) => `batch:${i}`);
    await Promise.all((await Promise.all(keys.map((k) => locks.acquire(k)))).map((l) => l.release())); // scripts cached on every master
    const counts = cluster.nodes('master').map((node) => countSocketWrites(node.stream));
    try {
      const held = await Promise.all(keys.map((k) => locks.acquire(k, { onBusy: 'throw' })));
      expect(await Promise.all(held.map((l) => l.release()))).toEqual(keys.map(() => true));
    } finally {
      counts.forEach((c) => c.stop());
    }
    const commands = counts.reduce((n, c) => n + c.counted.chunks, 0);
    const writes = counts.reduce((n, c) => n + c.counted.flushes, 0);
    expect(commands).toBe(2 * keys.length);
    // Each master got a share of the keys (3 masters, 64 slots' worth of keys).
    expect(counts.filter((c) => c.counted.chunks > 0)).toHaveLength(3);
    // The acquires leave in one turn, and so do the releases (their replies arrive together): a few writes per
    // master each time, where there was one per command.
    expect(writes).toBeLessThanOrEqual(commands / 4);
  });
});
