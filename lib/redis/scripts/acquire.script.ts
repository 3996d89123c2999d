import { NEXT_FENCE, PRUNE_STALE_WAITERS, SERVER_NOW } from './lua-snippets';

/**
 * One atomic attempt. Takes the lock when it is free and nobody queued before us (FIFO: a releasing
 * client cannot barge past the waiters), setting owner token and expiry in one SET and handing out
 * a fencing token in the same step. Finds the lock already ours when a release handed it to us
 * (see GRANT_NEXT_WAITER) and this attempt came before the notification.
 *
 * KEYS: lock, fence, queue, waiters.
 * ARGV: token, ttl ms, join ('1': take a place in the queue when busy), waiter lease ms, fence retention ms.
 * Returns {1, fence, lease ms left} when the lock is ours, else
 * {0, holder pttl (-1: free but promised to the queue head), position (-1: not queued)}.
 */
export const ACQUIRE_SCRIPT =
  SERVER_NOW +
  `
local token = ARGV[1]
local holder = redis.call('GET', KEYS[1])
if holder == token then
  return {1, redis.call('GET', KEYS[2]), redis.call('PTTL', KEYS[1])}
end
local head = redis.call('LINDEX', KEYS[3], 0)
if head then
` +
  // Only a non-empty queue can hold stale waiters: the uncontended path skips the pruning.
  PRUNE_STALE_WAITERS('KEYS[3]', 'KEYS[4]') +
  `
  head = redis.call('LINDEX', KEYS[3], 0)
end
if not holder and (not head or head == token) then
  redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('ZREM', KEYS[4], token)
  end
` +
  NEXT_FENCE('KEYS[2]', 'ARGV[5]') +
  `
  return {1, fence_text, tonumber(ARGV[2])}
end
local pttl = -1
if holder then pttl = redis.call('PTTL', KEYS[1]) end
local position = -1
if ARGV[3] == '1' then
  local lease = tonumber(ARGV[4])
  if redis.call('ZADD', KEYS[4], now_ms + lease, token) == 1 then
    redis.call('RPUSH', KEYS[3], token)
  end
  position = redis.call('LPOS', KEYS[3], token)
  redis.call('PEXPIRE', KEYS[3], lease * 2)
  redis.call('PEXPIRE', KEYS[4], lease * 2)
end
return {0, pttl, position}
`;
