import Redis, { type RedisOptions } from 'ioredis';
import type { RedisConnectionOption } from '../options/distributed-lock-module-options.interface';
import { connectionDefaults, isRedisClient, sentinelDefaults } from './redis-connection';

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
  // BullMQ refuses a connection with an ioredis keyPrefix (bullmqPrefix puts it in front of BullMQ's keys instead).
  const overrides: RedisOptions = {
    ...(role === 'worker' ? { maxRetriesPerRequest: null } : connectionDefaults(commandTimeout)),
    keyPrefix: undefined,
  };
  if (typeof option === 'string') return new Redis(option, overrides);
  const client = option as { duplicate?: (o?: RedisOptions) => unknown };
  if (typeof client.duplicate === 'function') return client.duplicate(overrides) as Redis;
  return new Redis({ ...sentinelDefaults(option), ...(option as RedisOptions), ...overrides });
}

/**
 * BullMQ's `prefix` for the module's `redis` option: BullMQ refuses a connection with an ioredis `keyPrefix`
 * ("ioredis does not support ioredis prefixes"), and startup failed with that. Its connections go without it
 * (bullmqConnection) and BullMQ puts the same text in front of its own keys, `<keyPrefix>bull:<queue>:…`: where the
 * ioredis prefix would have put them, inside the namespace (and ACL key patterns) the client was given. Undefined
 * (BullMQ's default, `bull`) without an ioredis keyPrefix.
 */
export function bullmqPrefix(option: RedisConnectionOption): string | undefined {
  const keyPrefix = typeof option === 'string' ? undefined : isRedisClient(option) ? option.options.keyPrefix : option.keyPrefix;
  return keyPrefix ? `${keyPrefix}bull` : undefined;
}
