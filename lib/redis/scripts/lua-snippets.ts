/**
 * Lua shared by several scripts. Each script is one atomic unit on the server; these snippets are
 * pasted in so the rules (what a stale waiter is, who gets woken) are written once.
 */

/** `now_ms`, `now_us` from the server clock: lease math never uses a client clock. */
export const SERVER_NOW = `
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
`;

/** Waiters that stopped refreshing their place (crashed, paused, gave up unseen) lose it. Bounded work per call. */
export const PRUNE_STALE_WAITERS = (queue: string, waiters: string) => `
local stale = redis.call('ZRANGEBYSCORE', ${waiters}, '-inf', now_ms, 'LIMIT', 0, 64)
for i = 1, #stale do
  redis.call('LREM', ${queue}, 0, stale[i])
  redis.call('ZREM', ${waiters}, stale[i])
end
`;

/**
 * The next fencing token of the key, stored as the key's last one: max(last + 1, server time in µs).
 * Strictly increasing per key, and still increasing when Redis lost the counter (restart without
 * persistence, key evicted) as long as the server clock does not step back — which is why the
 * counter may expire after `retention`. Defines `fence_text`.
 */
export const NEXT_FENCE = (fence: string, retention: string) => `
local fence_text = string.format('%.0f', math.max(tonumber(redis.call('GET', ${fence}) or '0') + 1, now_us))
redis.call('SET', ${fence}, fence_text, 'PX', ${retention})
`;

/**
 * Hand the free lock straight to the head of the queue, then tell that one waiter. The lock never
 * sits free between holders (no barging by the releasing process, no extra round trip for the
 * waiter), and only the waiter's own service hears of it: each service listens on its own channel.
 *
 * A waiter's token is `<service>.<ttl>.<random>`. The handed-over lease runs until the waiter's
 * place in the queue would have lapsed (at most its ttl): a waiter that died since it last refreshed
 * its place blocks the key no longer than it would have blocked the queue, and a live one renews to
 * its full ttl at a third of it, like any lease. The message is `<token> <fence> <lease ms>`.
 */
export const GRANT_NEXT_WAITER = (k: { lock: string; fence: string; queue: string; waiters: string }, a: { channelPrefix: string; retention: string }) => `
local next_waiter = redis.call('LINDEX', ${k.queue}, 0)
if next_waiter then
  local service, wanted = string.match(next_waiter, '^([^.]+)%.(%d+)%.')
  local place_until = tonumber(redis.call('ZSCORE', ${k.waiters}, next_waiter) or '0')
  if service and place_until > now_ms then
    local px = math.min(tonumber(wanted), place_until - now_ms)
    redis.call('SET', ${k.lock}, next_waiter, 'PX', px)
    redis.call('LPOP', ${k.queue})
    redis.call('ZREM', ${k.waiters}, next_waiter)
` + NEXT_FENCE(k.fence, a.retention) + `
    redis.call('PUBLISH', ${a.channelPrefix} .. service, next_waiter .. ' ' .. fence_text .. ' ' .. px)
  end
end
`;
