import type { Logger } from '@nestjs/common';

/**
 * How a server evicts keys when it reaches `maxmemory`, read from `INFO memory` (allowed where CONFIG
 * often is not, as on managed Redis); undefined when it evicts nothing (no limit, or `noeviction`).
 */
export function evictionOf(info: string): { policy: string; maxmemory: number } | undefined {
  const maxmemory = Number(/^maxmemory:(\d+)/m.exec(info)?.[1] ?? 0);
  const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
  if (!policy || policy === 'noeviction' || maxmemory === 0) return undefined;
  return { policy, maxmemory };
}

/**
 * Said once per server, at startup: a server that evicts keys when full may evict a held lock's key
 * (`volatile-*` policies pick among keys with an expiry, which every lock key has; `allkeys-*` among
 * all), and the next caller is then granted the lock beside its holder. A Redis used as a cache is often
 * set up this way; the locks need `noeviction`, under which a full server refuses new locks instead.
 */
export function warnIfEvicting(target: string, info: string, logger: Logger): void {
  const eviction = evictionOf(info);
  if (!eviction) return;
  logger.warn(
    `${target} evicts keys when it is full (maxmemory-policy ${eviction.policy}, maxmemory ${eviction.maxmemory} bytes): a held lock's ` +
      `key can be evicted, and the next caller granted the lock beside its holder. Give the locks a Redis with maxmemory-policy ` +
      `noeviction (a full server then refuses new locks with an error instead).`,
  );
}
