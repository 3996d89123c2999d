import { DistributedLockError } from './distributed-lock.error';

/**
 * `'retry'` waited the whole `waitTimeout` and the key never became ours (or, for a multi-key lock with
 * the watchdog off, the keys taken first ran out while a later one stayed held elsewhere).
 */
export class LockTimeoutError extends DistributedLockError {
  constructor(
    readonly key: string,
    readonly waitedMs: number,
    readonly attempts: number,
    /** What happened and what to change, when it is not the plain "held the whole wait". */
    explanation?: string,
  ) {
    super(
      `Timed out after ${Math.round(waitedMs)} ms and ${attempts} attempt(s) waiting for lock "${key}". ` +
        (explanation
          ? `${explanation}.`
          : `Another owner held it the whole time: raise waitTimeout, shorten the critical section, or use onBusy: 'fail-fast'.`),
    );
  }
}
