import { LUA_PRELUDE, SHARDED_LUA_PRELUDE } from './lua-functions';

/**
 * Owner-checked release: only the token that took the lock can free it, so a holder whose lease
 * expired can never delete the next holder's lock. With waiters queued, the lock goes straight to
 * the first live one (its SET replaces our token); otherwise it is deleted. Uncontended: GET, LLEN, DEL.
 *
 * KEYS: lock, fence, queue, waiters. ARGV: token, waiter channel prefix.
 * Returns 0 when not ours (any more), 1 when deleted, 2 when handed to a waiter, 3 when deleted with
 * only stale waiters seen and more queued (the caller passes it on: PASS_ON_SCRIPT).
 */
const releaseScript = (prelude: string): string =>
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
-- The common path, before any shared function is defined (they cost time on every call).
local queued = redis.call('LLEN', KEYS[3])
if queued == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
` +
  prelude +
  `
local outcome = grant_to_queued(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], queued)
if outcome == 'granted' then return 2 end
redis.call('DEL', KEYS[1])
if outcome == 'purging' then return 3 end
return 1
`;

export const RELEASE_SCRIPT = releaseScript(LUA_PRELUDE);

/** The same, announcing a handover with SPUBLISH (a Redis 7 Cluster; ARGV channel prefix in the lock's slot). */
export const SHARDED_RELEASE_SCRIPT = releaseScript(SHARDED_LUA_PRELUDE);
