import { GRANT_NEXT_WAITER } from './lua-snippets';

/**
 * Undo whatever an attempt may have left: our place in the queue (we stopped waiting) and the lock
 * itself if it is ours although we never saw it (an acquire whose answer was lost, or a release that
 * handed it to us as we gave up). If that leaves the lock free, it goes to the next live waiter, so
 * the queue never stalls on us.
 *
 * KEYS: lock, fence, queue, waiters. ARGV: token, waiter channel prefix.
 * Returns 1 if it freed the lock, else 0.
 */
export const ABANDON_SCRIPT =
  `
redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
` +
  GRANT_NEXT_WAITER({ lock: 'KEYS[1]', fence: 'KEYS[2]', queue: 'KEYS[3]', waiters: 'KEYS[4]' }, 'ARGV[2]') +
  `
if holder and not granted then redis.call('DEL', KEYS[1]) end
if holder then return 1 end
return 0
`;
