import { GRANT_NEXT_WAITER } from './lua-snippets';

/**
 * Owner-checked release: only the token that took the lock can free it, so a holder whose lease
 * expired can never delete the next holder's lock. With waiters queued, the lock goes straight to
 * the first live one (its SET replaces our token); otherwise it is deleted. Uncontended: GET, LPOP, DEL.
 *
 * KEYS: lock, fence, queue, waiters. ARGV: token, waiter channel prefix.
 * Returns 1 when released (deleted), 2 when released by handing it to a waiter, 0 when not ours (any more).
 */
export const RELEASE_SCRIPT =
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
` +
  GRANT_NEXT_WAITER({ lock: 'KEYS[1]', fence: 'KEYS[2]', queue: 'KEYS[3]', waiters: 'KEYS[4]' }, 'ARGV[2]') +
  `
if not granted then
  redis.call('DEL', KEYS[1])
  return 1
end
return 2
`;
