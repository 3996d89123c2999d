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
  if (holderTtl > 0) return `its lease ends in ${leaseLeft(holderTtl)} at the latest`;
  if (holderTtl === -4) return 'in part: no owner holds a majority of the nodes, or some nodes do not vote yet after a restart';
  return 'it is being handed to a queued waiter';
}

/** A lease left, in the unit a reader takes in at once: ms up to 10 s, then s, h, days. */
function leaseLeft(ms: number): string {
  if (ms < 10_000) return `${ms} ms`;
  if (ms < 7_200_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 172_800_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${(ms / 86_400_000).toFixed(1)} days`;
}
