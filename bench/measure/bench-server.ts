import type Redis from 'ioredis';
import { RedisProcess } from '../../test/harness/redis-process';
import { sumServer } from './aggregate';
import { ignoreClient } from './round-trips';
import { ServerDelta, startServerDelta } from './redis-server-stats';

export interface BenchServer {
  url: string;
  /** The benchmark's own connection (INFO); excluded from the round-trip counts. */
  admin: Redis;
}

/**
 * What a workload runs against: the address an adapter's `create` gets (one URL, or for a
 * multi-node adapter several separated by spaces) and the server-side counters, summed over every
 * server of the target.
 */
export interface BenchTarget {
  url: string;
  /** Snapshots the servers' counters now; the returned function reads the difference since. */
  startDelta(): Promise<() => Promise<ServerDelta>>;
}

/** Starts a fresh target for one library × workload and stops it afterwards, whatever happened. */
export type BenchFixture = <T>(run: (target: BenchTarget) => Promise<T>) => Promise<T>;

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

/** The single-node target: one fresh server. */
export const freshServer: BenchFixture = (run) => withFreshServer(({ url, admin }) => run({ url, startDelta: () => startServerDelta(admin) }));

/**
 * `count` fresh, independent redis-servers (Redlock nodes): the target's url lists them separated
 * by spaces, and its counters are the sum over all of them.
 */
export function freshNodes(count: number): BenchFixture {
  return async (run) => {
    const nodes = await Promise.all(Array.from({ length: count }, () => RedisProcess.start()));
    try {
      const admins = nodes.map((n) => n.client());
      for (const admin of admins) ignoreClient(admin);
      await Promise.all(admins.map((a) => a.ping()));
      return await run({
        url: nodes.map((n) => n.url).join(' '),
        async startDelta() {
          const reads = await Promise.all(admins.map((a) => startServerDelta(a)));
          return async () => sumServer(await Promise.all(reads.map((read) => read())));
        },
      });
    } finally {
      await Promise.all(nodes.map((n) => n.stop()));
    }
  };
}

/** redis-server version string of the binary the benchmark starts (for the machine section). */
export async function redisServerVersion(): Promise<string> {
  return withFreshServer(async ({ admin }) => {
    const info = await admin.info('server');
    return /^redis_version:(.+)$/m.exec(info)?.[1].trim() ?? 'unknown';
  });
}
