import Redis, { type RedisOptions } from 'ioredis';
import { DistributedLockError } from '../errors/distributed-lock.error';
import type { RedisConnectionOption } from '../options/distributed-lock-module-options.interface';

/** A connection for BullMQ from the module's `redis` option; BullMQ needs `maxRetriesPerRequest: null` for its workers. */
export function bullmqConnection(option: RedisConnectionOption): Redis {
  const overrides: RedisOptions = { maxRetriesPerRequest: null };
  if (typeof option === 'string') return new Redis(option, overrides);
  const client = option as { duplicate?: (o?: RedisOptions) => unknown; isCluster?: boolean };
  if (client.isCluster === true) {
    throw new DistributedLockError(
      `onBusy 'defer' does not support a Redis Cluster client yet: give DistributedLockModule a single Redis (or Sentinel) for it.`,
    );
  }
  if (typeof client.duplicate === 'function') return client.duplicate(overrides) as Redis;
  return new Redis({ ...(option as RedisOptions), ...overrides });
}
