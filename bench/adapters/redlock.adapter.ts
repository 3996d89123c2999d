import { ExecutionError, Redlock, Settings } from '@sesamecare-oss/redlock';
import Redis from 'ioredis';
import { BENCH_TTL_MS, Held, LockAdapter, LockClient } from './lock-adapter';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const VERSION = (require('@sesamecare-oss/redlock/package.json') as { version: string }).version;

/**
 * @sesamecare-oss/redlock on one Redis. `acquire`/`release` for workloads a–c; `using` (its
 * automatic extension) for workload d.
 */
function redlockAdapter(name: string, settings: Settings, describe: string): LockAdapter {
  return {
    name,
    settings: `@sesamecare-oss/redlock ${VERSION}, ${describe}, duration ${BENCH_TTL_MS} ms`,
    role: 'peer',
    async create(redisUrl: string): Promise<LockClient> {
      const client = new Redis(redisUrl);
      await client.ping();
      const redlock = new Redlock([client], settings);
      return {
        async acquire(key: string): Promise<Held | null> {
          try {
            const lock = await redlock.acquire([key], BENCH_TTL_MS);
            return { release: async () => void (await lock.release()) };
          } catch (error) {
            // ExecutionError: its retry budget (retryCount) ran out while the key stayed busy.
            if (error instanceof ExecutionError) return null;
            throw error;
          }
        },
        hold(key: string, ttl: number): Promise<Held> {
          // `using` holds (and auto-extends) until the routine settles; the routine waits for release().
          return new Promise<Held>((resolveHeld, rejectHeld) => {
            let finish!: () => void;
            const done = new Promise<void>((resolve) => (finish = resolve));
            const run = redlock.using([key], ttl, async () => {
              resolveHeld({
                release: async () => {
                  finish();
                  await run;
                },
              });
              await done;
            });
            run.catch(rejectHeld);
          });
        },
        async close() {
          await client.quit();
        },
      };
    },
  };
}

export const redlockDefaultAdapter = redlockAdapter(
  'redlock',
  {},
  'default settings (retryCount 10, retryDelay 200 ms, retryJitter 100 ms, automaticExtensionThreshold 500 ms)',
);

export const redlock10msAdapter = redlockAdapter(
  'redlock-10ms',
  { retryDelay: 10 },
  'retryDelay 10 ms, every other setting default (retryCount 10, retryJitter 100 ms: many retries come after ~1 ms)',
);
