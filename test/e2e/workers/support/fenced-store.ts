import type Redis from 'ioredis';

/**
 * The "storage" a lock protects, made fencing-aware: a write is accepted only if its fencing token
 * is strictly greater than the highest one the store has seen. One Lua call, so the compare and
 * the set are atomic. A holder whose lease silently lapsed (paused, slow) carries an old token and
 * is refused, whatever it believes about its lock.
 *
 * Fencing tokens are µs-based (~1.7e15), below 2^53, so Lua's doubles compare them exactly.
 */
const FENCED_WRITE = `
local highest = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local fence = tonumber(ARGV[1])
if fence <= highest then return 0 end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
return 1
`;

/** Returns true when the store accepted the write, false when a newer fence had already written. */
export async function fencedWrite(client: Redis, storeKey: string, fence: number, value: string): Promise<boolean> {
  const accepted = await client.eval(FENCED_WRITE, 1, storeKey, String(fence), value);
  return Number(accepted) === 1;
}
