/**
 * Lua shared by several scripts. Each script is one atomic unit on the server; these snippets are
 * pasted in so the rules (what a stale waiter is, who gets the lock next) are written once.
 *
 * Every command a script runs costs server time on every lock operation, and on a server that
 * sleeps between operations that time is paid with cold caches (measured here: a script that does
 * more work costs several times its warm price). So the uncontended paths touch no queue scan and
 * read the clock only for the fencing token; only waiting pays for the queue.
 */

/**
 * How long a key's last fencing token is kept after its last acquisition (ms). It only has to
 * outlive a step back of the server clock (see NEXT_FENCE); an unused key's token is gone after it.
 */
const FENCE_RETENTION_MS = 3_600_000;

/** `now_ms` from the server clock (and its TIME reply as `t`): lease math never uses a client clock. */
export const SERVER_NOW = `
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/**
 * The next fencing token of the key, as the Lua number `fence`: the Redis server time in µs, or the
 * last token + 1 when that is not above it (two grants in one µs, a clock stepped back).
 *
 * Why the clock and not a plain INCR: a counter is only as durable as Redis' data. A failover to a
 * replica that had not received the last grants (replication is asynchronous), a restart without
 * persistence or an eviction rolls a counter back, and the next holder would get a token an earlier
 * holder already has: the fenced store could not tell them apart in exactly the case fencing exists
 * for. A token taken from the clock is above every token handed out before as long as the server
 * clock (after a failover: the new primary's) does not stand behind the old one's by more than the
 * time between the lost grant and the next, seconds in any failover. Values stay below 2^53 (exact
 * in Lua and JavaScript numbers) until the year 2255. `clock`: a TIME reply the script already read.
 */
export const NEXT_FENCE = (fenceKey: string, clock = "redis.call('TIME')") => `
local fence_clock = ${clock}
local fence = tonumber(fence_clock[1]) * 1000000 + tonumber(fence_clock[2])
local last_fence = tonumber(redis.call('GET', ${fenceKey}) or '0')
if fence <= last_fence then fence = last_fence + 1 end
redis.call('SET', ${fenceKey}, string.format('%.0f', fence), 'PX', ${FENCE_RETENTION_MS})
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
` + NEXT_FENCE(k.fence, 't') + `
      redis.call('PUBLISH', ${channelPrefix} .. service, next_waiter .. ' ' .. string.format('%.0f', fence) .. ' ' .. px)
      granted = true
      break
    end
    next_waiter = redis.call('LPOP', ${k.queue})
    if not next_waiter then break end
  end
end
`;
