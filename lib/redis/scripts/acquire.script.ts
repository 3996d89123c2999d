import { FENCE_FUNCTIONS, LOCK_STATE_ERROR_PREFIX, NO_EXPIRY_REFUSAL, QUEUE_FUNCTIONS } from './lua-functions';

/**
 * One atomic attempt. Takes the lock when it is free and nobody live queued before us (FIFO: a
 * releasing client cannot barge past the waiters), setting owner token and expiry in one SET and
 * handing out a fencing token in the same step. Finds the lock already ours when a release handed it to
 * us (see grant_next_waiter) and this retry came before the notification, or when this same call ran
 * before and its reply was lost (a client that sends it again after a reconnect).
 *
 * The uncontended path is GET (last token), EXISTS (queue), SET NX and the next token (TIME, SET); no
 * queue scan. The last token is read first so a corrupt one fails the call before it writes anything.
 *
 * KEYS: lock, fence, queue, waiters.
 * ARGV: token, ttl ms, [waiter lease ms: take or refresh a place in the queue when busy, and the
 *       queue keys' expiry, twice that, as text: the server would format a computed number with a printf],
 *       [retry: '1' when an earlier attempt of this token queued it].
 * Returns {1, fence, lease ms left} when the lock is ours, else {0, holder pttl, position, last fence}
 * (fences and the lease as decimal text or numbers: the client reads both), where pttl -1 is "free
 * but promised to a live waiter ahead", -3 "free, and stale waiters ahead are still being dropped:
 * ask again at once"; position 0 is the head, 1 behind it, -1 not queued. The
 * last fencing token dates the attempt against a handover: an attempt that saw a token at or above
 * the handover's ran after that grant (and found the lock not ours), so the handover is stale.
 */
export const ACQUIRE_SCRIPT =
  FENCE_FUNCTIONS +
  `
local token, ttl = ARGV[1], ARGV[2]
local last_fence = last_fence_of(KEYS[2])
-- Anybody queued? A retry (ARGV[5]) may head the queue itself, so it reads the head; a first attempt
-- cannot, and only asks whether (EXISTS costs the server half what LINDEX does). A first attempt
-- reads the head later only if the lock turns out free. (Numbers a script passes to a command are
-- written as text: the server formats a Lua number with a printf.)
local retry = ARGV[5]
local head = retry and redis.call('LINDEX', KEYS[3], '0')
local queued = head or (not retry and redis.call('EXISTS', KEYS[3]) == 1)

-- The common path, before the queue's functions are even defined: nobody queued, and the lock free
-- (SET NX answers "free?" and takes it in one command).
if not queued and redis.call('SET', KEYS[1], token, 'NX', 'PX', ttl) then
  return {1, next_fence(KEYS[2], last_fence, redis.call('TIME')), ttl}
end
` +
  QUEUE_FUNCTIONS +
  `
-- The lock is ours now: leave the queue if we were its head, hand out the next fencing token.
local function took_it()
  if head then
    redis.call('LPOP', KEYS[3])
    redis.call('ZREM', KEYS[4], token)
  end
  return {1, next_fence(KEYS[2], last_fence, redis.call('TIME')), ttl}
end

-- We head the queue: take it if it is free.
if head == token and redis.call('SET', KEYS[1], token, 'NX', 'PX', ttl) then return took_it() end

-- pcall: a lock key of another type (written by something else) is not ours, and is refused below by what PTTL says.
if redis.pcall('GET', KEYS[1]) == token then
  -- Ours already. On a retry: handed to us by a release on another connection. On a first attempt: this
  -- same call ran before, and its reply was lost with the connection (a client that sends commands
  -- again after a reconnect: ioredis' autoResendUnfulfilledCommands, a Cluster client after a reset);
  -- "busy" would leave the key held by a token nobody uses. Either way this attempt takes it with a full
  -- lease, as a free lock (a handed one may be nearly over: a message read late), and the last token is
  -- the one that grant issued (nobody can have taken the key since). The expiry is a write of this
  -- connection, so a WAIT sent behind this script (replicaAcks) also covers that grant.
  redis.call('PEXPIRE', KEYS[1], ttl)
  return {1, last_fence, ttl}
end

local pttl = redis.call('PTTL', KEYS[1])
-- Every lease this library writes has an expiry: a lock key without one (PTTL -1, any type) was written
-- by something else and would block the key for good. Refused before this call writes anything.
if pttl == -1 then error({err = '${LOCK_STATE_ERROR_PREFIX} ${NO_EXPIRY_REFUSAL}'}) end
local clock, now_ms
if pttl == -2 then
  -- Free, but promised to a waiter ahead of us: unless its place lapsed.
  if queued and not head then head = redis.call('LINDEX', KEYS[3], '0') end
  clock = redis.call('TIME')
  now_ms = now_ms_of(clock)
  head = drop_stale_heads(KEYS[3], KEYS[4], head, token, now_ms)
  if head and head ~= token and place_until_of(KEYS[4], head) <= now_ms then
    -- More stale entries than one call drops. If no place at all is live, the whole queue is dead.
    if any_live_waiter(KEYS[4], now_ms_text_of(clock)) then
      pttl = -3
    else
      redis.call('UNLINK', KEYS[3], KEYS[4])
      head = false
    end
  end
  if not head or head == token then
    redis.call('SET', KEYS[1], token, 'PX', ttl)
    return took_it()
  end
  if pttl == -2 then pttl = -1 end
end
if not ARGV[3] then return {0, pttl, -1, last_fence} end

clock = clock or redis.call('TIME')
now_ms = now_ms or now_ms_of(clock)
local new_place = redis.call('ZADD', KEYS[4], now_ms + tonumber(ARGV[3]), token) == 1
if new_place then redis.call('RPUSH', KEYS[3], token) end
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('PEXPIRE', KEYS[4], ARGV[4])
-- Places of waiters that died while the lock stayed busy: a few per attempt (see drop_lapsed_places).
if drop_lapsed_places(KEYS[3], KEYS[4], now_ms_text_of(clock)) > 0 then head = redis.call('LINDEX', KEYS[3], '0') end
if queued and not head then
  -- A first attempt that found a queue is behind it, unless its token had a place already (an
  -- earlier attempt whose reply was lost): only then is the head worth reading.
  if new_place then return {0, pttl, 1, last_fence} end
  head = redis.call('LINDEX', KEYS[3], '0')
end
if not head or head == token then return {0, pttl, 0, last_fence} end
return {0, pttl, 1, last_fence}
`;
