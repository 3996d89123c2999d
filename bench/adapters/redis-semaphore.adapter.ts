import Redis from 'ioredis';
import { Mutex, TimeoutError } from 'redis-semaphore';
import { BENCH_TTL_MS, Held, LockAdapter, LockClient } from './lock-adapter';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const VERSION = (require('redis-semaphore/package.json') as { version: string }).version;

/** redis-semaphore `Mutex` with its default retry (fixed 10 ms interval, 10 s acquire timeout). */
export const redisSemaphoreAdapter: LockAdapter = {
  name: 'redis-semaphore',
  settings: `redis-semaphore ${VERSION} Mutex, defaults (retryInterval 10 ms, acquireTimeout 10 s, refresh at 0.8×lockTimeout), lockTimeout ${BENCH_TTL_MS} ms`,
  role: 'peer',
  async create(redisUrl: string): Promise<LockClient> {
    const client = new Redis(redisUrl);
    await client.ping();
    return {
      async acquire(key: string): Promise<Held | null> {
        const mutex = new Mutex(client, key, { lockTimeout: BENCH_TTL_MS });
        try {
          await mutex.acquire();
        } catch (error) {
          if (error instanceof TimeoutError) return null;
          throw error;
        }
        return { release: () => mutex.release() };
      },
      async hold(key: string, ttl: number): Promise<Held> {
        const mutex = new Mutex(client, key, { lockTimeout: ttl });
        await mutex.acquire();
        return { release: () => mutex.release() };
      },
      async close() {
        await client.quit();
      },
    };
  },
};
