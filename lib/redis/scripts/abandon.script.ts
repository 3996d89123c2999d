import { LUA_PRELUDE, SHARDED_LUA_PRELUDE } from './lua-functions';

/**
 * Undo whatever an attempt may have left: our place in the queue (we stopped waiting) and the lock
 * itself if it is ours although we never saw it (an acquire whose answer was lost, or a release that
 * handed it to us as we gave up). If that leaves the lock free, it goes to the next live waiter, so
 * the queue never stalls on us.
 *
 * KEYS: lock, fence, queue, waiters. ARGV: token, waiter channel prefix.
 * Returns 1 if it freed the lock, else 0; plus 2 when only stale waiters were seen and more are
 * queued (the caller passes the lock on: PASS_ON_SCRIPT).
 */
const abandonScript = (prelude: string): string =>
  prelude +
  `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then
  redis.call('LREM', KEYS[3], 0, ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 0
end
-- What stays queued once our place is gone, counted rather than read after the LREM: that may have
-- emptied (deleted) the queue, and a deleted key must not be touched again (lua-functions.ts). The
-- LLEN runs first, while the queue is as the script found it.
local queued = redis.call('LLEN', KEYS[3]) - redis.call('LREM', KEYS[3], 0, ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
local outcome = grant_next_waiter(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], queued)
if holder and outcome ~= 'granted' then redis.call('DEL', KEYS[1]) end
local freed = 0
if holder then freed = 1 end
if outcome == 'purging' then return freed + 2 end
return freed
`;

export const ABANDON_SCRIPT = abandonScript(LUA_PRELUDE);

/** The same, announcing a handover with SPUBLISH (a Redis 7 Cluster; ARGV channel prefix in the lock's slot). */
export const SHARDED_ABANDON_SCRIPT = abandonScript(SHARDED_LUA_PRELUDE);
