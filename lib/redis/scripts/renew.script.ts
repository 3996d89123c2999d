/**
 * Owner-checked lease renewal (watchdog and `extend`). A renewal that arrives after the key expired
 * or changed hands finds another token and does nothing.
 *
 * KEYS: lock. ARGV: token, ttl ms. Returns 1 when renewed, 0 when the lock is not ours.
 */
export const RENEW_SCRIPT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`;
