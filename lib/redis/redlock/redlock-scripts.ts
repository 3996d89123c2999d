import { luaScript } from '../lua-script';
import { FENCE_FUNCTIONS, LOCK_STATE_ERROR_PREFIX, NO_EXPIRY_REFUSAL, PLACE_FUNCTIONS } from '../scripts/lua-functions';
import { nodeSinceLua, recoveryLeftLua } from './node-since.lua';
import { RAISED_FENCE_RETENTION_MS, TICKET_QUEUE_FUNCTIONS } from './ticket-queue.lua';

/**
 * One node's vote on an attempt. Takes the node's lock when it is free and no live waiter has a
 * lower ticket; finds it already ours when this node's release handed it to us. A node that started
 * empty, or restarted at all, less than `recovery` ms ago (its marker key is missing or young, or its
 * process uptime is shorter) gives no vote: it may have forgotten a lock that is still held (see
 * redlock-recovery in docs/design.md).
 *
 * KEYS: lock, fence, queue (ticket zset), waiters, node marker.
 * ARGV: token, ttl ms, ticket, recovery ms, fence proposal (fence-proposal.ts), [waiter lease ms: take or
 * refresh a place when busy, and the queue keys' expiry ms, twice that, as text]. A token this node issues is max(its clock µs, its last + 1, the proposal).
 * Returns {1, fence, lease ms left} (ours), {0, holder pttl, position, last fence, holder token or ''}
 * (busy; pttl -1: free but a waiter with a lower ticket is queued, -3: stale waiters still being
 * dropped; the holder lets the client tell a split vote from another's majority), or
 * {2, recovery ms left} (this node does not vote yet).
 */
export const REDLOCK_ACQUIRE_SCRIPT =
  FENCE_FUNCTIONS +
  `
local token, ttl = ARGV[1], ARGV[2]
local last_fence, proposal = last_fence_of(KEYS[2]), ARGV[5]
local clock = redis.call('TIME')
-- Milliseconds are needed by the recovery check and the queue only: the common path (recovery off)
-- skips the conversions (tonumber costs the server about 2,000 instructions a call).
local now_ms
if ARGV[4] ~= '0' then
  local recovery = tonumber(ARGV[4])
  now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
` +
  nodeSinceLua('KEYS[5]') +
  `  if since + recovery > now_ms then return {2, since + recovery - now_ms} end
end

-- The common path, before the queue's functions are even defined: nobody queued (no queue key, so
-- no waiter entry either: both expire together) and the lock free (SET NX answers and takes it).
if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('SET', KEYS[1], token, 'NX', 'PX', ttl) then
  return {1, next_fence(KEYS[2], last_fence, clock, proposal), ttl}
end
` +
  TICKET_QUEUE_FUNCTIONS +
  `
now_ms = now_ms or now_ms_of(clock)
local holder = redis.call('GET', KEYS[1])
if holder == token then
  redis.call('ZREM', KEYS[3], token)
  redis.call('ZREM', KEYS[4], token)
  return {1, last_fence, redis.call('PTTL', KEYS[1])}
end
local pttl = -1
if holder then
  pttl = redis.call('PTTL', KEYS[1])
  -- No lease of this library lacks an expiry: that key was written by something else (acquire.script.ts).
  if pttl == -1 then error({err = '${LOCK_STATE_ERROR_PREFIX} ${NO_EXPIRY_REFUSAL}'}) end
else
  drop_stale(KEYS[3], KEYS[4], now_ms_text_of(clock))
  local head = head_of(KEYS[3])
  -- A head without a live place (lapsed, or its entry in waiters gone) is dropped too, a bounded run.
  for _ = 1, STALE_WAITERS_PER_CALL do
    if not head or head == token or place_until_of(KEYS[4], head) > now_ms then break end
    redis.call('ZREM', KEYS[3], head)
    redis.call('ZREM', KEYS[4], head)
    head = head_of(KEYS[3])
  end
  if head and head ~= token and place_until_of(KEYS[4], head) <= now_ms then
    pttl = -3
  elseif not head or head == token or ahead_of(KEYS[3], tonumber(ARGV[3]), token, head) then
    redis.call('SET', KEYS[1], token, 'PX', ttl)
    redis.call('ZREM', KEYS[3], token)
    redis.call('ZREM', KEYS[4], token)
    return {1, next_fence(KEYS[2], last_fence, clock, proposal), ttl}
  end
end
local holder_seen = holder or ''
if not ARGV[6] then return {0, pttl, -1, last_fence, holder_seen} end
queue_up(KEYS[3], KEYS[4], token, ARGV[3], tonumber(ARGV[6]), now_ms, ARGV[7])
-- Places of waiters that died while the lock stayed busy: a lock held for weeks is never free to drop
-- them, and live waiters' refreshes push the keys' expiry on. Ours was just refreshed, so the queue
-- keeps it and is never emptied here. (A free lock's were dropped above.)
if holder then drop_stale(KEYS[3], KEYS[4], now_ms_text_of(clock)) end
if head_of(KEYS[3]) == token then return {0, pttl, 0, last_fence, holder_seen} end
return {0, pttl, 1, last_fence, holder_seen}
`;

/**
 * Owner-checked release on one node: hands the node's lock to the live waiter with the lowest ticket,
 * else deletes it. On a node whose lock is not ours, leaves its queue: an acquisition that won on a
 * majority while this node was busy had queued there, and that place would keep the node promised to
 * us, blocking its vote for the next waiter until the place lapsed.
 * KEYS: lock, fence, queue, waiters, node marker. ARGV: token, waiter channel prefix, fence proposal, recovery ms.
 * Returns 0 not ours, 1 deleted, 2 handed to a waiter, 3 not ours on a node that (re)started less than
 * `recovery` ago: it may have forgotten the lock, so its "not ours" is no evidence (RecoveringAnswer).
 */
export const REDLOCK_RELEASE_SCRIPT =
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  ` +
  recoveryLeftLua('KEYS[5]', 'ARGV[4]') +
  `  if recovery_left > 0 then return 3 end
  return 0
end
if redis.call('ZCARD', KEYS[3]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
` +
  FENCE_FUNCTIONS +
  TICKET_QUEUE_FUNCTIONS +
  `
if hand_to_head(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3]) == 'granted' then return 2 end
redis.call('DEL', KEYS[1])
return 1
`;

/**
 * Leaves the node's queue, and frees the node's lock if it is ours (handing it on like a release).
 * KEYS: lock, fence, queue, waiters. ARGV: token, waiter channel prefix, fence proposal. Returns 1 if it freed the lock.
 */
export const REDLOCK_ABANDON_SCRIPT =
  FENCE_FUNCTIONS +
  TICKET_QUEUE_FUNCTIONS +
  `
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if hand_to_head(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[2], ARGV[3]) ~= 'granted' then redis.call('DEL', KEYS[1]) end
return 1
`;

/**
 * Gives one node's vote back after an attempt that did not win a majority, keeping the waiter's place
 * (same ticket): the node's lock is deleted if it is ours, not handed on, so the next attempts of
 * every waiter still agree on who is first. KEYS: lock, fence, queue, waiters. ARGV: token, ticket,
 * waiter lease ms, the queue keys' expiry ms (twice that). Returns the key's last fencing token ('0' when none): a handover to us at or below
 * it came before this give-back, which undid it (redlock-handovers.ts).
 */
export const REDLOCK_GIVE_BACK_SCRIPT =
  PLACE_FUNCTIONS +
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('ZADD', KEYS[4], string.format('%.0f', now_ms_of(redis.call('TIME')) + tonumber(ARGV[3])), ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('PEXPIRE', KEYS[4], ARGV[4])
return redis.call('GET', KEYS[2]) or '0'
`;

/**
 * The fencing write-back: while the node's lock is still ours, raises its last token to at least the
 * token the acquisition returns (the highest any granting node issued), so every later grant on this
 * node issues a higher one. KEYS: lock, fence. ARGV: token, fence. Returns 1 raised (or already
 * above), 0 not ours.
 */
export const REDLOCK_RAISE_FENCE_SCRIPT =
  FENCE_FUNCTIONS +
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if fence_above(ARGV[2], last_fence_of(KEYS[2])) then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', '${RAISED_FENCE_RETENTION_MS}')
end
return 1
`;

/**
 * Renewal on one node (watchdog, extend, minHold's shorten): owner-checked like the single-node one, and,
 * given the lock's fencing token, it takes the key back where it is free. A node loses the key when it
 * restarts empty, or when the key expires there while the holder is cut off from it; without this the
 * majority holding the lock for us shrank with each such fault, and a lock held through a rolling restart
 * (restart one node, wait until it votes again, restart the next) was lost at the second restart although
 * two of three nodes were up and voting all along. Safe because a renewal counts only when its answer
 * comes back before the lease's deadline (watchdog.ts, Lock.extend): until then our keys on the majority
 * that last granted or renewed it are alive, so nobody else holds a majority, and taking a free node
 * cannot make a second one. The node's last token is raised to ours, so a later grant there issues a
 * higher one (as after a fencing write-back). Nodes still in their nodeRecoveryDelay take it back too:
 * the delay keeps a forgetful node from voting for a newcomer, and we are the holder.
 * Not where the node issued a token above ours since: someone was granted the key there after us. The
 * premise above fails when keys vanish behind the lock's back on a majority (FLUSHALL, DEL, eviction):
 * another client could then take a majority, run and release, and a take-back made us believe we had held
 * the lock throughout. Such a node answers "not ours", so with a majority of them the holder is told it
 * lost the lock. A node restarted empty has no later token (its fence is gone or ours), so a rolling restart
 * is still ridden out; a node where a contender's vote was given back does not count for us until released.
 * KEYS: lock, fence. ARGV: token, ttl ms, [the lock's fencing token]. Returns 1 renewed or taken back,
 * 0 held by another token, free without a fencing token, or free with a later token issued there.
 */
export const REDLOCK_RENEW_SCRIPT =
  `
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if holder or not ARGV[3] then return 0 end
` +
  FENCE_FUNCTIONS +
  `
local last = last_fence_of(KEYS[2])
if fence_above(last, ARGV[3]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if fence_above(ARGV[3], last) then redis.call('SET', KEYS[2], ARGV[3], 'PX', '${RAISED_FENCE_RETENTION_MS}') end
return 1
`;

/**
 * Whether the node holds the lock: 1 held, 0 free, 2 free on a node that (re)started less than `recovery`
 * ago (it may have forgotten the lock: no evidence either way). KEYS: lock, node marker. ARGV: recovery ms.
 */
export const REDLOCK_IS_LOCKED_SCRIPT =
  `
if redis.call('EXISTS', KEYS[1]) == 1 then return 1 end
` +
  recoveryLeftLua('KEYS[2]', 'ARGV[1]') +
  `if recovery_left > 0 then return 2 end
return 0
`;

/**
 * The health probe of one node (RedlockStore.probe). A write first, as every vote is one: a node that
 * refuses writes (out of memory, READONLY) or holds them (CLIENT PAUSE WRITE) fails the probe as it
 * fails an acquire. Then how long the node still gives no votes, by the acquire's recovery rule.
 * KEYS: probe key, node marker. ARGV: probe key ttl ms, recovery ms. Returns the ms left before the
 * node votes (0: it votes now).
 */
export const REDLOCK_PROBE_SCRIPT =
  `
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
` +
  recoveryLeftLua('KEYS[2]', 'ARGV[2]') +
  `return recovery_left
`;

/** The scripts a Redlock node runs. */
export const REDLOCK_SCRIPTS = {
  acquire: luaScript(5, REDLOCK_ACQUIRE_SCRIPT),
  release: luaScript(5, REDLOCK_RELEASE_SCRIPT),
  isLocked: luaScript(2, REDLOCK_IS_LOCKED_SCRIPT),
  abandon: luaScript(4, REDLOCK_ABANDON_SCRIPT),
  giveBack: luaScript(4, REDLOCK_GIVE_BACK_SCRIPT),
  raiseFence: luaScript(2, REDLOCK_RAISE_FENCE_SCRIPT),
  renew: luaScript(2, REDLOCK_RENEW_SCRIPT),
  probe: luaScript(2, REDLOCK_PROBE_SCRIPT),
} as const;
