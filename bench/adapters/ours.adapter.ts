import { LockService, LockTimeoutError } from '../../lib';
import { BENCH_TTL_MS, Held, LockAdapter, LockClient } from './lock-adapter';

/** This library with its defaults (FIFO queue + targeted wake-up, watchdog on), one LockService per client. */
export const oursAdapter: LockAdapter = {
  name: 'ours',
  settings: `nestjs-distributed-lock (this repo), defaults (watchdog on, waitTimeout 5000 ms), ttl ${BENCH_TTL_MS} ms`,
  role: 'ours',
  async create(redisUrl: string): Promise<LockClient> {
    const service = new LockService({ redis: redisUrl, ttl: BENCH_TTL_MS });
    await service.onModuleInit();
    return lockClientOf(service);
  },
};

/** One LockService as a benchmarked client: its own waiting (a LockTimeoutError is a give-up), its watchdog for `hold`. */
export function lockClientOf(service: LockService): LockClient {
  return {
    async acquire(key: string): Promise<Held | null> {
      try {
        const lock = await service.acquire(key);
        return { release: async () => void (await lock.release()) };
      } catch (error) {
        if (error instanceof LockTimeoutError) return null;
        throw error;
      }
    },
    async hold(key: string, ttl: number): Promise<Held> {
      const lock = await service.acquire(key, { ttl, watchdog: true });
      return { release: async () => void (await lock.release()) };
    },
    close: () => service.close(),
  };
}
