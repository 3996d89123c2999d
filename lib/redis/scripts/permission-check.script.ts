/**
 * Startup's question to Redis whether the module's user may do what lock calls do, writing nothing: run
 * a script (EVAL), on a key of the lock namespace (the key patterns of the user's ACL are checked
 * against it), calling TIME as the acquire script does. Not the health probe's write: startup leaves
 * no key behind.
 *
 * KEYS: a key under the keyPrefix. Returns its PTTL.
 */
export const PERMISSION_CHECK_SCRIPT = `
redis.call('TIME')
return redis.call('PTTL', KEYS[1])
`;
