import { FENCE_RETENTION_MS, handOverFunction, PLACE_FUNCTIONS, STALE_WAITERS_PER_CALL } from '../scripts/lua-functions';

/**
 * The Redlock mode's waiting queue, per node: a sorted set of waiting tokens scored by the *ticket*
 * each acquisition picked once (client time in µs; equal scores are ordered by the token, as Redis
 * orders members), next to the shared `waiters` set (token → until when its place is live, server ms).
 * Every node orders the same waiters the same way whatever order their calls arrived in, so every
 * node hands the lock to the same head and concurrent waiters do not split the vote (a FIFO list per
 * node would: each node would serve whoever reached it first).
 *
 * Defined after FENCE_FUNCTIONS (lua-functions.ts), whose `last_fence_of` / `next_fence` it uses.
 */
export const TICKET_QUEUE_FUNCTIONS = `
local STALE_WAITERS_PER_CALL = ${STALE_WAITERS_PER_CALL}
${handOverFunction('PUBLISH')}${PLACE_FUNCTIONS}
-- Drops waiters whose place lapsed (crashed, paused, gave up unseen), a bounded run per call.
-- \`now_ms_text\`: the server clock in ms as text (now_ms_text_of): numbers passed to a command cost a printf.
local function drop_stale(queue, waiters, now_ms_text)
  local stale = redis.call('ZRANGEBYSCORE', waiters, '-inf', now_ms_text, 'LIMIT', '0', '${STALE_WAITERS_PER_CALL}')
  for _, waiter in ipairs(stale) do
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', waiters, waiter)
  end
end

-- The waiter with the lowest ticket, or false.
local function head_of(queue)
  return redis.call('ZRANGE', queue, '0', '0')[1] or false
end

-- Whether (ticket, token) comes before the queued \`head\` in the queue's order.
local function ahead_of(queue, ticket, token, head)
  local head_ticket = tonumber(redis.call('ZSCORE', queue, head))
  return ticket < head_ticket or (ticket == head_ticket and token < head)
end

-- Takes (or refreshes) a place: the ticket never changes, the place's lease does. \`expiry\`: the
-- queue keys' expiry (ms, text), twice the lease.
local function queue_up(queue, waiters, token, ticket, lease, now_ms, expiry)
  redis.call('ZADD', waiters, string.format('%.0f', now_ms + lease), token)
  redis.call('ZADD', queue, ticket, token)
  redis.call('PEXPIRE', queue, expiry)
  redis.call('PEXPIRE', waiters, expiry)
end

-- Hands the lock (free, or ours and being given up) to the live waiter with the lowest ticket and
-- tells its service (same message as the single-node scripts). In this mode one node's message is
-- one vote: the waiter enters once a majority of nodes handed it over with one token, else asks again
-- (redlock-handovers.ts).
-- \`proposal\`: the releaser's fence proposal (fence-proposal.ts), so every node hands over with one token.
-- Returns 'granted', 'empty', or 'purging' (only stale entries seen, and more are queued).
local function hand_to_head(lock, fence_key, queue, waiters, channel_prefix, proposal)
  local last_fence = last_fence_of(fence_key)
  local clock = redis.call('TIME')
  local now_ms = now_ms_of(clock)
  for _ = 1, STALE_WAITERS_PER_CALL do
    local waiter = head_of(queue)
    if not waiter then return 'empty' end
    local place_until = place_until_of(waiters, waiter)
    redis.call('ZREM', queue, waiter)
    redis.call('ZREM', waiters, waiter)
    if hand_over(lock, fence_key, channel_prefix, waiter, place_until, now_ms, clock, last_fence, proposal) then return 'granted' end
  end
  if redis.call('ZCARD', queue) > 0 then return 'purging' end
  return 'empty'
end
`;

/** Kept as long as a fencing token (see FENCE_RETENTION_MS): the raise must outlive the same clock steps. */
export const RAISED_FENCE_RETENTION_MS = FENCE_RETENTION_MS;
