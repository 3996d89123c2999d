/** Channel of one LockService: a release publishes the next waiter's token on its service's channel only. */
export const waiterChannelPrefix = (prefix: string): string => `${prefix}waiters:`;

/**
 * Every Redis name that belongs to one lock. They all start with `prefix{key}`, so they share a
 * Cluster hash slot whatever the key contains (the first `{…}` decides the slot, and it is the same
 * text for all of them), and they are injective: the lock key ends in `}`, every other name in a
 * one-letter suffix, so no user key can produce another key's lock, counter or queue.
 */
export interface LockRedisKeys {
  /** The user's key, as given. */
  readonly key: string;
  /** Holds the owner token, with the lease as its expiry. */
  readonly lock: string;
  /** Last fencing token handed out for this key. */
  readonly fence: string;
  /** FIFO list of waiting owner tokens. */
  readonly queue: string;
  /** Sorted set: waiting token → time (Redis clock, ms) after which its place is forfeit. */
  readonly waiters: string;
}

export function lockRedisKeys(prefix: string, key: string): LockRedisKeys {
  const base = `${prefix}{${key}`;
  return {
    key,
    lock: `${base}}`,
    fence: `${base}}:f`,
    queue: `${base}}:q`,
    waiters: `${base}}:w`,
  };
}
