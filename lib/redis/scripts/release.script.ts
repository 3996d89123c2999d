import { NOTIFY_NEXT_WAITER, PRUNE_STALE_WAITERS, SERVER_NOW } from './lua-snippets';

/**
 * Owner-checked delete: only the token that took the lock can free it, so a holder whose lease
 * expired can never delete the next holder's lock. Wakes the next waiter only.
 *
 * KEYS: lock, queue, waiters. ARGV: token, waiter channel prefix. Returns 1 when released, 0 when not ours (any more).
 */
export const RELEASE_SCRIPT =
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if redis.call('EXISTS', KEYS[2]) == 0 then return 1 end
` +
  SERVER_NOW +
  PRUNE_STALE_WAITERS('KEYS[2]', 'KEYS[3]') +
  NOTIFY_NEXT_WAITER('KEYS[2]', 'ARGV[2]') +
  `return 1
`;
