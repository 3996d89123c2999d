import Redis, { type RedisOptions } from 'ioredis';
import type { RedisConnectionOption } from '../options/distributed-lock-module-options.interface';
import { connectionDefaults, sentinelDefaults } from './redis-connection';

/**
 * What a BullMQ connection is for. The worker's needs `maxRetriesPerRequest: null` (BullMQ's blocking
 * commands; BullMQ reconnects and retries them itself). The queue's only enqueues: like the lock's own
 * connections it fails fast while Redis is unreachable and never replays a command after a reconnect,
 * so an enqueue the caller was told failed (LockConnectionError) cannot land later.
 */
export type BullmqConnectionRole = 'queue' | 'worker';

/**
 * A connection for BullMQ from the module's `redis` option (a client you passed is duplicated, never used itself).
 * A Cluster client was refused at startup (defer/defer-connection-support.ts).
 */
export function bullmqConnection(option: RedisConnectionOption, role: BullmqConnectionRole, commandTimeout: number): Redis {
  const overrides: RedisOptions = role === 'worker' ? { maxRetriesPerRequest: null } : connectionDefaults(commandTimeout);
  if (typeof option === 'string') return new Redis(option, overrides);
  const client = option as { duplicate?: (o?: RedisOptions) => unknown };
  if (typeof client.duplicate === 'function') return client.duplicate(overrides) as Redis;
  return new Redis({ ...sentinelDefaults(option), ...(option as RedisOptions), ...overrides });
}
