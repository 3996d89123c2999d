import { DistributedLockError } from './distributed-lock.error';

/**
 * `close()` (application shutdown) has begun: the service takes no new locks. Thrown to calls made
 * after that, to waiters woken by the shutdown, and to acquisitions whose grant arrived after it
 * began (that grant was given back). Locks held when close began stay held until their work ends.
 * `isLocked()` still answers while close() waits for that work, and is refused once it has closed.
 */
export class LockServiceClosedError extends DistributedLockError {
  constructor(
    /** The lock that was not acquired. */
    readonly key: string,
    /** What became of this call, e.g. "the grant that arrived during close() was given back". */
    detail?: string,
    /** What was not done for `key`: a lock call's key "was not acquired"; isLocked()'s "was not looked up". */
    notDone = 'was not acquired',
  ) {
    super(`LockService is closing or closed; no new locks are taken: lock "${key}" ${notDone}${detail ? ` (${detail})` : ''}.`);
  }
}
