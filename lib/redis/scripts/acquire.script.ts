import { DROP_STALE_HEADS, NEXT_FENCE, SERVER_NOW } from './lua-snippets';

/**
 * One atomic attempt. Takes the lock when it is free and nobody live queued before us (FIFO: a
 * releasing client cannot barge past the waiters), setting owner token and expiry in one SET and
 * handing out a fencing token in the same step. On a retry, finds the lock already ours when a
 * release handed it to us (see GRANT_NEXT_WAITER) and this attempt came before the notification.
 *
 * Every command here runs on every lock operation, so each path does only what it needs: the
 * uncontended one is LINDEX, SET NX and the fencing token (TIME, GET, SET; no queue scan); a first
 * attempt on a busy key skips the "handed to us?" check (a fresh token was never queued) and derives
 * its queue position from the head it already read.
 *
 * KEYS: lock, fence, queue, waiters.
 * ARGV: token, ttl ms, [waiter lease ms: take or refresh a place in the queue when busy],
 *       [retry: '1' when an earlier attempt of this token queued it].
 * Returns {1, fence, lease ms left} when the lock is ours, else
 * {0, holder pttl (-1: free but promised to the queue head), position (0: head, 1: behind it, -1: not queued)}.
 */
/** The lock is ours now: leave the queue if we were its head, hand out the next fencing token. */
const TOOK_IT =
  `
if head then
  redis.call('LPOP', KEYS[3])
  redis.call('ZREM', KEYS[4], token)
end
` +
  NEXT_FENCE('KEYS[2]') +
  `
return {1, fence, tonumber(ARGV[2])}
`;

export const ACQUIRE_SCRIPT =
  `
local token = ARGV[1]
local head = redis.call('LINDEX', KEYS[3], 0)
-- Nobody queued before us: take it if it is free (SET NX answers "free?" and takes it in one command).
if (not head or head == token) and redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
` +
  TOOK_IT +
  `
end
if ARGV[4] and redis.call('GET', KEYS[1]) == token then
  -- Handed to us by a release on another connection. Setting the expiry it already has is a write
  -- of this connection, so a WAIT sent behind this script (replicaAcks) also covers that handover.
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 then redis.call('PEXPIRE', KEYS[1], left) end
  return {1, tonumber(redis.call('GET', KEYS[2]) or '-1'), left}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then
  -- Free, but promised to another waiter at the head of the queue: unless its place lapsed.
` +
  SERVER_NOW +
  DROP_STALE_HEADS('KEYS[3]', 'KEYS[4]', 'token') +
  `
  if not head or head == token then
    redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
` +
  TOOK_IT +
  `
  end
  pttl = -1
end
if not ARGV[3] then return {0, pttl, -1} end
` +
  SERVER_NOW +
  `
local lease = tonumber(ARGV[3])
if redis.call('ZADD', KEYS[4], now_ms + lease, token) == 1 then
  redis.call('RPUSH', KEYS[3], token)
end
redis.call('PEXPIRE', KEYS[3], lease * 2)
redis.call('PEXPIRE', KEYS[4], lease * 2)
if not head or head == token then return {0, pttl, 0} end
return {0, pttl, 1}
`;
