/**
 * The health probe's write, run as a script because every lock call is one: a Redis user that may SET
 * but not run scripts (an ACL without +@scripting), or whose scripts may not call what the lock scripts
 * call, fails the probe as it fails every acquire, instead of passing a plain SET. It reads TIME, as the
 * acquire script does for fencing tokens (TIME is in no @read or @write category), and writes the probe
 * key with a short expiry; nothing reads it.
 *
 * KEYS: the probe key. ARGV: its expiry, ms. Returns 1.
 */
export const HEALTH_PROBE_SCRIPT = `
redis.call('TIME')
redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
return 1
`;
