import { GRANT_NEXT_WAITER, PRUNE_STALE_WAITERS, SERVER_NOW } from './lua-snippets';

/**
 * Owner-checked release: only the token that took the lock can free it, so a holder whose lease
 * expired can never delete the next holder's lock. With waiters queued, the lock goes straight to
 * the first live one.
 *
 * KEYS: lock, fence, queue, waiters. ARGV: token, waiter channel prefix, fence retention ms.
 * Returns 1 when released, 0 when not ours (any more).
 */
export const RELEASE_SCRIPT =
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[3]) == 0 then return 1 end
` +
  SERVER_NOW +
  PRUNE_STALE_WAITERS('KEYS[3]', 'KEYS[4]') +
  GRANT_NEXT_WAITER(
    { lock: 'KEYS[1]', fence: 'KEYS[2]', queue: 'KEYS[3]', waiters: 'KEYS[4]' },
    { channelPrefix: 'ARGV[2]', retention: 'ARGV[3]' },
  ) +
  `return 1
`;
