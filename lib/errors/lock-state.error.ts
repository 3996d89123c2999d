import { DistributedLockError } from './distributed-lock.error';

/**
 * A Redis key of the lock holds something this library did not write (a fencing token that is not a
 * number, a value of the wrong type): the lock cannot be used safely, so the call was refused before
 * anything was written and nothing ran under it. Not a connection problem: retrying will not help
 * until the key is repaired.
 */
export class LockStateError extends DistributedLockError {
  constructor(
    readonly key: string,
    /** The Redis key at fault, when Redis said which one. */
    readonly redisKey: string | undefined,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
