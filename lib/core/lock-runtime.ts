import type { Logger } from '@nestjs/common';
import type { LockStore } from './lock-store';
import type { Watchdog } from './watchdog';
import type { Lock } from './lock';
import type { LockStats } from './lock-stats';
import type { LockMetrics } from '../observability/lock-metrics';

/** What a Lock handle needs from the service that made it (internal; not exported to users). */
export interface LockRuntime {
  readonly store: LockStore;
  readonly watchdog: Watchdog;
  readonly logger: Logger;
  readonly stats: LockStats;
  readonly metrics: LockMetrics;
  /** The lock ended (released or lost): the service stops counting it as held. */
  forget(lock: Lock): void;
}
