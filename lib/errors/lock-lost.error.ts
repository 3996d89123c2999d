import { DistributedLockError } from './distributed-lock.error';

/** Why a held lease ended without `release()`. */
export type LockLostReason = 'expired' | 'not-owner' | 'max-hold' | 'shutdown';

/**
 * The lease ended while its holder still believed it held the lock: it expired (the process was
 * paused or Redis unreachable past the TTL), Redis no longer had our token, or `maxHold` was reached.
 * Work guarded by the lock must stop; writes should carry the fencing token so a store rejects them.
 *
 * Reason `'shutdown'` is a notice, not a loss: the service is shutting down and asks the work to
 * finish or stop within `shutdownTimeout`; the lock stays held (and renewed) until it is released.
 */
export class LockLostError extends DistributedLockError {
  constructor(
    readonly key: string,
    readonly reason: LockLostReason,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(
      reason === 'shutdown'
        ? `Lock "${key}": ${detail}.`
        : `Lock "${key}" was lost (${reason}): ${detail}. Stop the guarded work; another owner may hold the key now.`,
      options,
    );
  }
}
