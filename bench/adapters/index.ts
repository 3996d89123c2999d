import type { LockAdapter } from './lock-adapter';
import { oursAdapter } from './ours.adapter';
import { oursScriptsAdapter } from './ours-scripts.adapter';
import { rawFloorAdapter } from './raw-floor.adapter';
import { redisSemaphoreAdapter } from './redis-semaphore.adapter';
import { redlock10msAdapter, redlockDefaultAdapter } from './redlock.adapter';

export * from './lock-adapter';

/** Column order of every table: ours first, then the peers, then the floor. */
export const ADAPTERS: readonly LockAdapter[] = [oursAdapter, redisSemaphoreAdapter, redlockDefaultAdapter, redlock10msAdapter, rawFloorAdapter];

/**
 * Parts of ours measured alone, in (a) only (interleaved with the libraries, shown after ours): what the library's
 * client code adds to its scripts, and what the scripts add to the raw floor.
 */
export const SEQUENTIAL_DIAGNOSTICS: readonly LockAdapter[] = [oursScriptsAdapter];
