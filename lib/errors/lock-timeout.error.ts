import { DistributedLockError } from './distributed-lock.error';

/** `'retry'` waited the whole `waitTimeout` and the key never became ours. */
export class LockTimeoutError extends DistributedLockError {
  constructor(
    readonly key: string,
    readonly waitedMs: number,
    readonly attempts: number,
  ) {
    super(
      `Timed out after ${Math.round(waitedMs)} ms and ${attempts} attempt(s) waiting for lock "${key}". ` +
        `Another owner held it the whole time: raise waitTimeout, shorten the critical section, or use onBusy: 'fail-fast'.`,
    );
  }
}
