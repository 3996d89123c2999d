import { DistributedLockError } from './distributed-lock.error';

/** The key is held by someone else and the policy was `'throw'` (one attempt, no waiting). */
export class LockBusyError extends DistributedLockError {
  constructor(
    readonly key: string,
    /**
     * Remaining lease of the current holder in ms, when Redis reported one; -1: free but promised to a
     * queued waiter; -4: no owner holds a majority of the nodes (Redlock). See LockStore's AcquireReply.
     */
    readonly holderTtl: number,
  ) {
    super(
      `Lock "${key}" is held by another owner (${busyDetail(holderTtl)}). Retry later, or use onBusy: 'retry' with a waitTimeout to wait for it.`,
    );
  }
}

function busyDetail(holderTtl: number): string {
  if (holderTtl > 0) return `its lease ends in ${holderTtl} ms at the latest`;
  if (holderTtl === -4) return 'in part: no owner holds a majority of the nodes, or some nodes do not vote yet after a restart';
  return 'it is being handed to a queued waiter';
}
