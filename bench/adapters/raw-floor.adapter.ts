import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import { BENCH_TTL_MS, Held, LockAdapter, LockClient } from './lock-adapter';

/** Fixed retry interval of the floor when the key is busy (the same as redis-semaphore's default). */
export const RAW_RETRY_MS = 10;

/** Deletes the key only while it still holds the caller's token (1 = deleted). */
export const COMPARE_AND_DELETE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

type FloorClient = Redis & { benchCompareAndDelete(key: string, token: string): Promise<number> };

/**
 * The least a correct Redis lock can do: `SET key token NX PX` to take it (a random UUID as the
 * token), an owner-checked delete script to free it, a fixed-interval retry when busy. No
 * watchdog, no queue, no fencing.
 */
export const rawFloorAdapter: LockAdapter = {
  name: 'raw-floor',
  settings: `SET key token NX PX ${BENCH_TTL_MS} (token: crypto.randomUUID) + compare-and-delete Lua (EVALSHA), fixed ${RAW_RETRY_MS} ms retry, never gives up`,
  role: 'floor',
  async create(redisUrl: string): Promise<LockClient> {
    const client = new Redis(redisUrl) as FloorClient;
    client.defineCommand('benchCompareAndDelete', { numberOfKeys: 1, lua: COMPARE_AND_DELETE });
    await client.ping();
    return {
      async acquire(key: string): Promise<Held | null> {
        const lockKey = `raw:${key}`;
        // randomUUID (122 random bits, entropy drawn in blocks): randomBytes(16) per lock cost this
        // floor 4–11 µs per cycle here, which is not what a lock needs to spend.
        const token = randomUUID();
        while ((await client.set(lockKey, token, 'PX', BENCH_TTL_MS, 'NX')) !== 'OK') await sleep(RAW_RETRY_MS);
        return { release: async () => void (await client.benchCompareAndDelete(lockKey, token)) };
      },
      async close() {
        await client.quit();
      },
    };
  },
};
