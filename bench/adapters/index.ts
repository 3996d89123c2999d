import type { LockAdapter } from './lock-adapter';
import { oursAdapter } from './ours.adapter';
import { rawFloorAdapter } from './raw-floor.adapter';
import { redisSemaphoreAdapter } from './redis-semaphore.adapter';
import { redlock10msAdapter, redlockDefaultAdapter } from './redlock.adapter';

export * from './lock-adapter';

/** Column order of every table: ours first, then the peers, then the floor. */
export const ADAPTERS: readonly LockAdapter[] = [oursAdapter, redisSemaphoreAdapter, redlockDefaultAdapter, redlock10msAdapter, rawFloorAdapter];
