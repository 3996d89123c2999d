import type { Cluster, Redis } from 'ioredis';

/**
 * What a Redis client looks like, told without loading ioredis: the option validators run in the
 * testing module too, which must not load it (only `import type` here).
 */
export type RedisClient = Redis | Cluster;

/** A Redis Cluster client (duck-typed, like isRedisClient: a client from another copy of ioredis counts too). */
export function isClusterClient(client: unknown): client is Cluster {
  return (client as { isCluster?: unknown } | null)?.isCluster === true;
}

/** Duck-typed so a client from another copy of ioredis (a different node_modules) is still recognised. */
export function isRedisClient(value: unknown): value is RedisClient {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as RedisClient).defineCommand === 'function' &&
    typeof (value as RedisClient).duplicate === 'function'
  );
}
