import { LUA_PRELUDE, SHARDED_LUA_PRELUDE } from './lua-functions';

/**
 * Continues a release or abandon that met more stale waiters than one call drops: while the lock is
 * free, drops the next run of stale entries and hands the lock to the first live waiter behind them.
 * Each call is bounded (STALE_WAITERS_PER_CALL); the caller repeats while it answers 1.
 *
 * KEYS: lock, fence, queue, waiters. ARGV: waiter channel prefix.
 * Returns 1 when more stale entries are queued, else 0 (handed over, queue empty, or lock taken).
 */
const passOnScript = (prelude: string): string =>
  prelude +
  `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if grant_next_waiter(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]) == 'purging' then return 1 end
return 0
`;

export const PASS_ON_SCRIPT = passOnScript(LUA_PRELUDE);

/** The same, announcing a handover with SPUBLISH (a Redis 7 Cluster; ARGV channel prefix in the lock's slot). */
export const SHARDED_PASS_ON_SCRIPT = passOnScript(SHARDED_LUA_PRELUDE);
