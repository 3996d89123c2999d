import { ABANDON_SCRIPT } from './abandon.script';
import { ACQUIRE_SCRIPT } from './acquire.script';
import { RELEASE_SCRIPT } from './release.script';
import { RENEW_SCRIPT } from './renew.script';

/**
 * Registered with ioredis `defineCommand`: EVALSHA with a transparent EVAL fallback on NOSCRIPT, so
 * a failover to a primary with an empty script cache costs one extra round trip, not an outage.
 * The names are namespaced because a user's own client may be shared with us.
 */
export const LOCK_SCRIPTS = {
  distributedLockAcquire: { numberOfKeys: 4, lua: ACQUIRE_SCRIPT },
  distributedLockRelease: { numberOfKeys: 4, lua: RELEASE_SCRIPT },
  distributedLockRenew: { numberOfKeys: 1, lua: RENEW_SCRIPT },
  distributedLockAbandon: { numberOfKeys: 4, lua: ABANDON_SCRIPT },
} as const;

export type LockScriptName = keyof typeof LOCK_SCRIPTS;
