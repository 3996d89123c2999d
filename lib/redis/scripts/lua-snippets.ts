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
 * Wake exactly one waiter: the head of the queue. Its token starts with its service's id
 * (`<service>.<random>`), and each service listens on its own channel, so the message reaches that
 * one process and no other waiter of the key anywhere is disturbed.
 */
export const NOTIFY_NEXT_WAITER = (queue: string, channelPrefix: string) => `
local next_waiter = redis.call('LINDEX', ${queue}, 0)
if next_waiter then
  local service = string.match(next_waiter, '^([^.]+)%.')
  if service then redis.call('PUBLISH', ${channelPrefix} .. service, next_waiter) end
end
`;
