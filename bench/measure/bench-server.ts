import type Redis from 'ioredis';
import { RedisProcess } from '../../test/harness/redis-process';
import { ignoreClient } from './round-trips';

export interface BenchServer {
  url: string;
  /** The benchmark's own connection (INFO); excluded from the round-trip counts. */
  admin: Redis;
}

/**
 * A fresh redis-server (never the system one on 6379) for one library × workload, so no run sees
 * another's keys, script cache or counters; stopped afterwards whatever happened.
 */
export async function withFreshServer<T>(run: (server: BenchServer) => Promise<T>): Promise<T> {
  const redis = await RedisProcess.start();
  try {
    const admin = redis.client();
    ignoreClient(admin);
    await admin.ping();
    return await run({ url: redis.url, admin });
  } finally {
    await redis.stop();
  }
}

/** redis-server version string of the binary the benchmark starts (for the machine section). */
export async function redisServerVersion(): Promise<string> {
  return withFreshServer(async ({ admin }) => {
    const info = await admin.info('server');
    return /^redis_version:(.+)$/m.exec(info)?.[1].trim() ?? 'unknown';
  });
}
