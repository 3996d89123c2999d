/**
 * `isLocked` as a script, not a plain EXISTS: a Cluster client with `scaleReads: 'slave'` or `'all'` sends commands
 * Redis flags read-only (EXISTS, PTTL, GET) to replicas, which answered from behind the primary (replication is
 * asynchronous) and, while frozen or unreachable, failed isLocked on a lock whose primary was fine. A script is sent
 * to the primary whatever scaleReads says, as every other lock call is.
 *
 * KEYS: the lock key. Returns 1 when it exists.
 */
export const IS_LOCKED_SCRIPT = `
return redis.call('EXISTS', KEYS[1])
`;
