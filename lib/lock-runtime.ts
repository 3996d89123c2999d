import type { Logger } from '@nestjs/common';
import type { RedisLockStore } from './redis/redis-lock-store';
import type { Watchdog } from './watchdog';
import type { Lock } from './lock';

/** Counters a production operator wants on a dashboard. */
export interface LockStats {
  acquired: number;
  released: number;
  /** release() found the lock already expired or owned by someone else (nothing was deleted). */
  releaseFailures: number;
  lost: number;
  renewals: number;
  renewalErrors: number;
  busy: number;
  timeouts: number;
  connectionErrors: number;
}

export const emptyStats = (): LockStats => ({
  acquired: 0, released: 0, releaseFailures: 0, lost: 0, renewals: 0, renewalErrors: 0, busy: 0, timeouts: 0, connectionErrors: 0,
});

/** What a Lock handle needs from the service that made it (internal; not exported to users). */
export interface LockRuntime {
  readonly store: RedisLockStore;
  readonly watchdog: Watchdog;
  readonly logger: Logger;
  readonly stats: LockStats;
  /** The lock ended (released or lost): the service stops counting it as held. */
  forget(lock: Lock): void;
}
