import { DistributedLockError } from './distributed-lock.error';

/** The key is held by someone else and the policy was `'throw'` (one attempt, no waiting). */
export class LockBusyError extends DistributedLockError {
  constructor(
    readonly key: string,
    /** Remaining lease of the current holder in ms, when Redis reported one (-1: free but promised to a queued waiter). */
    readonly holderTtl: number,
  ) {
    super(
      `Lock "${key}" is held by another owner` +
        (holderTtl > 0 ? ` (its lease ends in ${holderTtl} ms at the latest)` : ' (it is being handed to a queued waiter)') +
        `. Retry later, or use onBusy: 'retry' with a waitTimeout to wait for it.`,
    );
  }
}
