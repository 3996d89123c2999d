import { NOTIFY_NEXT_WAITER, PRUNE_STALE_WAITERS, SERVER_NOW } from './lua-snippets';

/**
 * Undo whatever an attempt may have left: our place in the queue (we stopped waiting) and the lock
 * itself if an acquire whose answer we never saw did take it (timeout on a slow or frozen Redis).
 * If that leaves the lock free, the next waiter is woken so the queue never stalls on us.
 *
 * KEYS: lock, queue, waiters. ARGV: token, waiter channel prefix. Returns 1 if it freed the lock, else 0.
 */
export const ABANDON_SCRIPT =
  SERVER_NOW +
  `
redis.call('LREM', KEYS[2], 0, ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
local freed = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  freed = 1
end
if redis.call('EXISTS', KEYS[1]) == 1 then return freed end
` +
  PRUNE_STALE_WAITERS('KEYS[2]', 'KEYS[3]') +
  NOTIFY_NEXT_WAITER('KEYS[2]', 'ARGV[2]') +
  `return freed
`;
