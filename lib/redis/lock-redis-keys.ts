/** Channel of one LockService: a release publishes the next waiter's token on its service's channel only. */
export const waiterChannelPrefix = (prefix: string): string => `${prefix}waiters:`;

/**
 * Every Redis name that belongs to one lock: `prefix{tag}`, `prefix{tag}:f`, `prefix{tag}:q`,
 * `prefix{tag}:w`, where `tag` is the user's key with `%` written `%25` and `}` written `%7D`.
 *
 * One Cluster slot: Redis hashes the text between the first `{` and the next `}` when it is not
 * empty. The prefix has no braces (refused by the options), so the first `{` is ours; the tag has
 * no `}`, so the next `}` is ours too; the key is not empty, so neither is the tag. Every name of
 * the lock therefore hashes exactly `tag`. Unescaped, a key such as `}x` made `prefix{}x}`: an
 * empty tag, each name hashed whole, and every script on the lock failed with CROSSSLOT.
 *
 * Injective: the escape is reversible (`%` itself is escaped, so `}` and the text `%7D` stay
 * apart), the tag ends at the first `}`, and what follows it (nothing, `:f`, `:q`, `:w`) says which
 * name it is; so no user key can produce another key's lock, counter or queue.
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
  const lock = `${prefix}{${hashTagText(key)}}`;
  return { key, lock, fence: `${lock}:f`, queue: `${lock}:q`, waiters: `${lock}:w` };
}

/** Keys without `%` or `}` (nearly all) keep their text, so their Redis names stay readable. */
const hashTagText = (key: string): string => key.replace(/[%}]/g, (ch) => (ch === '%' ? '%25' : '%7D'));
