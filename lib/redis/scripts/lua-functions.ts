/**
 * Lua shared by the scripts, as `local function`s with explicit inputs and outputs. Every script
 * defines these (LUA_PRELUDE, or FENCE_FUNCTIONS first and QUEUE_FUNCTIONS after its common path),
 * so the rules (what a stale waiter is, who gets the lock next, what a fencing token is) are written
 * once; each script stays one atomic unit on the server.
 *
 * Redis does not roll a script back when it fails half-way, so every function that can refuse
 * (a corrupt fencing token) is called before the script writes anything.
 *
 * No command may touch a queue or waiters key after the script may have emptied (so deleted) it:
 * while a Cluster slot is MIGRATING, the source runs a script only when all its keys are there, and
 * answers any later command on a key that is gone with "Script attempted to access a non local key"
 * (the writes made before it stay). So the queue's length is carried as a count (the caller's LLEN,
 * minus what the script popped) instead of read again, and a next head is read before the pop that
 * may empty the queue. The waiters set holds exactly the queued tokens (every RPUSH comes with a ZADD,
 * every LPOP/LREM with a ZREM), so it is not empty while the queue is not.
 */

/**
 * How long a key's last fencing token is kept after its last acquisition (ms). It only has to
 * outlive a step back of the server clock (see next_fence); an unused key's token is gone after it.
 */
export const FENCE_RETENTION_MS = 3_600_000;

/**
 * How long a key's queue and places outlive their last refresh (ms, as the text a script passes to PEXPIRE:
 * a number computed in Lua would cost the server a printf): two waiter leases, so a live waiter, which
 * refreshes three times per lease, never sees them go, and a queue whose waiters all died vanishes.
 */
export const queueKeysExpiry = (waiterLease: number): string => String(2 * waiterLease);

/**
 * Most stale queue entries one script call drops. Bounds the server time of any call (about 1 µs of
 * Redis work per entry); a longer run of dead waiters is dropped by the calls that follow, which the
 * callers send at once when a reply says the purge is unfinished (release: 3, abandon: +2,
 * acquire: holder ttl -3).
 */
export const STALE_WAITERS_PER_CALL = 256;

/**
 * Most lapsed places one busy attempt drops (drop_lapsed_places). Each costs an LREM, which walks the
 * queue list, so far fewer than a free lock's STALE_WAITERS_PER_CALL; a live waiter refreshes three
 * times per waiterLease, so a few per attempt clear the places of a crashed process within seconds.
 */
export const LAPSED_PLACES_PER_BUSY_ATTEMPT = 16;

/**
 * Largest last token accepted: the next one (+1) is still an exact integer in Lua and JavaScript
 * (2^53 - 1). Clock-based tokens are near 1.8e15, so a value above this was not written by us.
 */
const MAX_LAST_FENCE = '9007199254740990';

/**
 * How far ahead of a node's clock (s) a Redlock fencing-token proposal may run and still be taken: the
 * proposal's own lead (1 s, fence-proposal.ts) plus a second of clock difference between client and node.
 */
const PROPOSAL_ACCEPTED_LEAD_S = 2;

/** Error replies a script raises on corrupt lock state (see lock-state.ts): `LOCKSTATE <what> <value>`. */
export const LOCK_STATE_ERROR_PREFIX = 'LOCKSTATE';

/** What follows LOCK_STATE_ERROR_PREFIX when a lock key has no expiry (no lease of this library lacks one). */
export const NO_EXPIRY_REFUSAL = 'noexpiry';

/**
 * What a fencing token is: the functions the uncontended acquire needs. Scripts define these first
 * and the queue's (QUEUE_FUNCTIONS) only after their common-path early return: Redis runs a script's
 * whole body on every call, and defining the queue functions there cost the uncontended cycle about
 * 7 µs of Redis CPU, a third of its script time (measured, docs/benchmark.md).
 */
export const FENCE_FUNCTIONS = `
-- The key's last fencing token, as the decimal text it is stored as ('0' when none). A value that is
-- not a decimal integer below 2^53 without leading zeros was not written by this library: refuse,
-- before anything is written, rather than hand out a token that does not increase.
local function last_fence_of(fence_key)
  local raw = redis.call('GET', fence_key)
  if not raw then return '0' end
  if #raw > 16 or not string.match(raw, '^[1-9]%d*$') or (#raw == 16 and raw > '${MAX_LAST_FENCE}') then
    error({err = '${LOCK_STATE_ERROR_PREFIX} fence ' .. string.sub(raw, 1, 40)})
  end
  return raw
end

-- Whether token text a is above b. Tokens stay text from TIME to the reply: converting costs the
-- server more than the rest of the fence code (tonumber about 2,000 instructions, string.format
-- about 9,000; npm run bench:instructions). Neither has leading zeros, so the longer is the larger,
-- and text of one length compares as its number.
local function fence_above(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

-- The next fencing token: the server time in microseconds (raised to \`proposal\` when given and not
-- too far ahead: the Redlock mode's, fence-proposal.ts), or last + 1 when that is not above the last (two grants in one
-- microsecond, a clock stepped back). A plain counter would be rolled back by a failover to a replica
-- that missed the last grants, a restart without persistence or an eviction, and hand out a token an
-- earlier holder already has; the clock is above every earlier token as long as the server clock
-- (after a failover: the new primary's) is not behind the old one by more than the time between the
-- lost grant and the next. 16 digits (exact as a double) until the year 2255.
local function next_fence(fence_key, last, clock, proposal)
  local micros = string.sub('00000' .. clock[2], -6)
  local fence = clock[1] .. micros
  if proposal and fence_above(proposal, fence) then
    -- A proposal runs a second ahead of its client's clock. One further ahead of this node's clock than
    -- ${PROPOSAL_ACCEPTED_LEAD_S} s comes from a client whose clock is wrong, and would carry that error into the key's
    -- tokens: a node that later loses its last token falls back to its own clock, below it. Not taken.
    if not fence_above(proposal, (tonumber(clock[1]) + ${PROPOSAL_ACCEPTED_LEAD_S}) .. micros) then fence = proposal end
  end
  if not fence_above(fence, last) then fence = string.format('%.0f', tonumber(last) + 1) end
  redis.call('SET', fence_key, fence, 'PX', '${FENCE_RETENTION_MS}')
  return fence
end
`;

/**
 * How a handover is announced: PUBLISH (every server; on a Cluster the bus copies it to every node)
 * or SPUBLISH (Redis 7 Cluster: only the shard that owns the channel's slot, which the caller makes
 * the lock's own slot; see wake-route.ts).
 */
export type PublishCommand = 'PUBLISH' | 'SPUBLISH';

/** The server clock in ms and a waiter's place: shared by the single-node queue and the Redlock ticket queue. */
export const PLACE_FUNCTIONS = `
-- Milliseconds on the server clock: lease math never uses a client clock.
local function now_ms_of(clock)
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

-- The same as decimal text, for a range bound: built from TIME's text, since formatting a number
-- costs the server a printf (string.format '%.0f', or Redis' '%.17g' for a number passed to a command).
local function now_ms_text_of(clock)
  return clock[1] .. string.sub('00000' .. clock[2], -6, -4)
end

-- Until when (server ms) a queued token keeps its place; 0 when it has none.
local function place_until_of(waiters, token)
  return tonumber(redis.call('ZSCORE', waiters, token) or '0')
end
`;

/**
 * `hand_over`: gives the lock to one dequeued waiter whose place is still live and tells that waiter,
 * on its own service's channel only; false (nothing written) for a stale or foreign entry. Shared by
 * the single-node queue (below) and the Redlock ticket queue. Defined after FENCE_FUNCTIONS.
 */
export const handOverFunction = (publish: PublishCommand): string => `
-- A waiter's token is <service>.<ttl>.<random>. The handed-over lease runs until the waiter's place
-- would have lapsed (at most its ttl), so a waiter that died since it last refreshed blocks the key
-- no longer than it would have blocked the queue; a live one renews at once.
-- The message, <token> <fence> <lease ms> <place ms left> <lock key>, names the key it is about (one
-- token serves every key of a multi-key lock), and its place left lets the waiter count the lease
-- from the handover rather than from its last refresh.
local function hand_over(lock, fence_key, channel_prefix, waiter, place_until, now_ms, clock, last_fence, proposal)
  local service, wanted = string.match(waiter, '^([^.]+)%.(%d+)%.')
  if not service or place_until <= now_ms then return false end
  local place_left = place_until - now_ms
  -- Both at most a ttl (below 2^31 ms, options/limits.ts): '%d' is exact even where a C long has 32
  -- bits, and costs the server half what '%.0f' does.
  local px = string.format('%d', math.min(tonumber(wanted), place_left))
  redis.call('SET', lock, waiter, 'PX', px)
  local fence = next_fence(fence_key, last_fence, clock, proposal)
  -- pcall: the announcement is the one step that may be refused after the writes (an ACL user with no
  -- pub/sub channel: Redis 7 gives new users none by default). The handover stands all the same (the
  -- waiter, whose subscription was refused too, finds the lock its own at its next attempt), and a
  -- release that handed the lock on must not fail as if it had not.
  redis.pcall('${publish}', channel_prefix .. service,
    waiter .. ' ' .. fence .. ' ' .. px .. ' ' ..
    string.format('%d', place_left) .. ' ' .. lock)
  return true
end
`;

/** Who waits, for how long, and who gets the lock next: only the contended paths define these. */
export const queueFunctions = (publish: PublishCommand): string => `
local STALE_WAITERS_PER_CALL = ${STALE_WAITERS_PER_CALL}
${handOverFunction(publish)}${PLACE_FUNCTIONS}
-- Drops queue heads whose place lapsed (they stopped refreshing it: crashed, paused, gave up
-- unseen), at most STALE_WAITERS_PER_CALL, stopping at \`keep\`. Returns the new head (or false).
-- The next head is read before the pop (the pop may empty the queue, and an emptied key must not be
-- touched again: see the top of this file); a head, being queued, is in waiters, so its ZSCORE is safe.
local function drop_stale_heads(queue, waiters, head, keep, now_ms)
  for _ = 1, STALE_WAITERS_PER_CALL do
    if not head or head == keep or place_until_of(waiters, head) > now_ms then return head end
    local next_head = redis.call('LINDEX', queue, '1')
    redis.call('LPOP', queue)
    redis.call('ZREM', waiters, head)
    head = next_head
  end
  return head
end

-- Drops at most LAPSED_PLACES_PER_BUSY_ATTEMPT places that lapsed (oldest first) while the lock is busy;
-- returns how many. A free lock drops lapsed heads as it is passed on, but a lock held for weeks (a
-- leader's, renewed by its watchdog) never is free, and its live waiters' refreshes push the queue keys'
-- expiry on: the place of every waiter that died meanwhile (kill -9, an abandon lost to a network blip)
-- stayed, one more per dead waiter. Called by a busy attempt after it set its own place, so the queue
-- keeps that one and is never emptied here (see the top of this file). The range read is O(log n); each
-- drop walks the list (LREM), only when a place did lapse.
local function drop_lapsed_places(queue, waiters, now_ms_text)
  local lapsed = redis.call('ZRANGEBYSCORE', waiters, '-inf', now_ms_text, 'LIMIT', '0', '${LAPSED_PLACES_PER_BUSY_ATTEMPT}')
  for _, waiter in ipairs(lapsed) do
    redis.call('LREM', queue, '1', waiter)
    redis.call('ZREM', waiters, waiter)
  end
  return #lapsed
end

-- Whether any queued token still holds a live place (one O(log n) range read).
local function any_live_waiter(waiters, now_ms_text)
  return #redis.call('ZRANGEBYSCORE', waiters, '(' .. now_ms_text, '+inf', 'LIMIT', '0', '1') > 0
end

-- Hands the lock (free, or ours and being given up) straight to the first live waiter (see
-- hand_over): the lock never sits free between holders.
-- Returns 'granted', 'empty', or 'purging' (only stale entries seen, and more are queued).
-- grant_to_queued is the same for a caller that knows the queue holds \`queued\` (> 0) entries: it pops
-- at most those, and tells 'empty' from 'purging' by the count, never by reading the queue again (its
-- last pop may have deleted it; see the top of this file). Each entry is looked up and removed in
-- waiters before the next pop, while it is still there.
local function grant_to_queued(lock, fence_key, queue, waiters, channel_prefix, queued)
  local last_fence = last_fence_of(fence_key)
  local clock = redis.call('TIME')
  local now_ms = now_ms_of(clock)
  for _ = 1, math.min(queued, STALE_WAITERS_PER_CALL) do
    local waiter = redis.call('LPOP', queue)
    if not waiter then return 'empty' end
    local place_until = place_until_of(waiters, waiter)
    redis.call('ZREM', waiters, waiter)
    if hand_over(lock, fence_key, channel_prefix, waiter, place_until, now_ms, clock, last_fence) then return 'granted' end
  end
  if queued > STALE_WAITERS_PER_CALL then return 'purging' end
  return 'empty'
end

-- \`queued\`: the queue's length when the caller knows it (it may have emptied the queue itself),
-- else read here.
local function grant_next_waiter(lock, fence_key, queue, waiters, channel_prefix, queued)
  queued = queued or redis.call('LLEN', queue)
  if queued == 0 then return 'empty' end
  return grant_to_queued(lock, fence_key, queue, waiters, channel_prefix, queued)
end
`;

/** The queue's functions announcing handovers with PUBLISH (every server but a sharded Cluster). */
export const QUEUE_FUNCTIONS = queueFunctions('PUBLISH');

/** Every shared function, for the scripts that have no common path to run before the queue's. */
export const LUA_PRELUDE = FENCE_FUNCTIONS + QUEUE_FUNCTIONS;

/** LUA_PRELUDE announcing handovers with SPUBLISH (the release, abandon and pass-on of a sharded Cluster). */
export const SHARDED_LUA_PRELUDE = FENCE_FUNCTIONS + queueFunctions('SPUBLISH');
