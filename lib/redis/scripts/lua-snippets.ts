/**
 * Lua shared by several scripts. Each script is one atomic unit on the server; these snippets are
 * pasted in so the rules (what a stale waiter is, who gets the lock next) are written once.
 *
 * Every command a script runs costs server time on every lock operation, and on a server that
 * sleeps between operations that time is paid with cold caches (measured here: a script that does
 * more work costs several times its warm price). So the uncontended paths touch no clock, no queue
 * scan and no string formatting; only waiting pays for the queue.
 */

/**
 * How long a fencing counter lives after it was seeded (ms). Only how often a busy key's tokens jump
 * depends on it, never their order (see NEXT_FENCE); an unused key's counter is gone after it.
 */
const FENCE_RETENTION_MS = 3_600_000;

/** `now_ms` from the server clock: lease math never uses a client clock. */
export const SERVER_NOW = `
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * The next fencing token of the key, as the Lua number `fence`. Strictly increasing per key: INCR of
 * the stored last one. When the counter is missing (first use, an hour after it was seeded, or lost
 * by a restart without persistence or an eviction) it is seeded with the server clock in µs, with
 * FENCE_RETENTION_MS to live. That seed is above every token handed out before: each of those was
 * at most the clock at its seeding plus one per acquisition since, and acquisitions run more than a
 * µs apart, so no token ever exceeds the clock at the moment it was handed out. Fences therefore keep
 * increasing across a lost counter as long as the server clock does not step back, and the counter's
 * lifetime needs no refreshing (one command less on every acquisition): a busy key's tokens just
 * jump once an hour.
 */
export const NEXT_FENCE = (fenceKey: string) => `
local fence = redis.call('INCR', ${fenceKey})
if fence == 1 then
  local seed = redis.call('TIME')
  fence = tonumber(seed[1]) * 1000000 + tonumber(seed[2])
  redis.call('SET', ${fenceKey}, string.format('%.0f', fence), 'PX', ${FENCE_RETENTION_MS})
end
`;

/**
 * Drops waiters at the head of the queue whose place lapsed (they stopped refreshing it: crashed,
 * paused, gave up unseen), at most 64 per call so a script's work stays bounded; a stale waiter
 * further back is dropped when it reaches the head. Updates the script's `head` variable (the
 * queue's first token, or false) and stops at `keep`. Needs `now_ms`.
 */
export const DROP_STALE_HEADS = (queue: string, waiters: string, keep: string) => `
for _ = 1, 64 do
  if not head or head == ${keep} or tonumber(redis.call('ZSCORE', ${waiters}, head) or '0') > now_ms then break end
  redis.call('LPOP', ${queue})
  redis.call('ZREM', ${waiters}, head)
  head = redis.call('LINDEX', ${queue}, 0)
end
`;

/**
 * Hands the lock (free, or ours and being given up) straight to the first live waiter and tells that
 * one waiter, on its own service's channel only. The lock never sits free between holders (no
 * barging by the releasing process, no extra round trip for the waiter). Sets `granted`.
 *
 * A waiter's token is `<service>.<ttl>.<random>`. The handed-over lease runs until the waiter's
 * place in the queue would have lapsed (at most its ttl): a waiter that died since it last refreshed
 * its place blocks the key no longer than it would have blocked the queue, and a live one renews to
 * its full ttl at once. The message is `<token> <fence> <lease ms>`. Waiters whose place lapsed are
 * skipped (at most 64 per call).
 */
export const GRANT_NEXT_WAITER = (k: { lock: string; fence: string; queue: string; waiters: string }, channelPrefix: string) => `
local granted = false
local next_waiter = redis.call('LPOP', ${k.queue})
if next_waiter then
` + SERVER_NOW + `
  for _ = 1, 64 do
    local place_until = tonumber(redis.call('ZSCORE', ${k.waiters}, next_waiter) or '0')
    redis.call('ZREM', ${k.waiters}, next_waiter)
    local service, wanted = string.match(next_waiter, '^([^.]+)%.(%d+)%.')
    if service and place_until > now_ms then
      local px = math.min(tonumber(wanted), place_until - now_ms)
      redis.call('SET', ${k.lock}, next_waiter, 'PX', px)
` + NEXT_FENCE(k.fence) + `
      redis.call('PUBLISH', ${channelPrefix} .. service, next_waiter .. ' ' .. string.format('%.0f', fence) .. ' ' .. px)
      granted = true
      break
    end
    next_waiter = redis.call('LPOP', ${k.queue})
    if not next_waiter then break end
  end
end
`;
