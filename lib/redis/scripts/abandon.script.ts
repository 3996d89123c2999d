import { GRANT_NEXT_WAITER, PRUNE_STALE_WAITERS, SERVER_NOW } from './lua-snippets';

/**
 * Undo whatever an attempt may have left: our place in the queue (we stopped waiting) and the lock
 * itself if it is ours although we never saw it (an acquire whose answer was lost, or a release that
 * handed it to us as we gave up). If that leaves the lock free, it goes to the next waiter, so the
 * queue never stalls on us.
 *
 * KEYS: lock, fence, queue, waiters. ARGV: token, waiter channel prefix, fence retention ms.
 * Returns 1 if it freed the lock, else 0.
 */
export const ABANDON_SCRIPT =
  SERVER_NOW +
  `
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
local freed = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  freed = 1
end
if redis.call('EXISTS', KEYS[1]) == 1 then return freed end
` +
  PRUNE_STALE_WAITERS('KEYS[3]', 'KEYS[4]') +
  GRANT_NEXT_WAITER(
    { lock: 'KEYS[1]', fence: 'KEYS[2]', queue: 'KEYS[3]', waiters: 'KEYS[4]' },
    { channelPrefix: 'ARGV[2]', retention: 'ARGV[3]' },
  ) +
  `return freed
`;
