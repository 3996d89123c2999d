import { DistributedLockError } from './distributed-lock.error';

/**
 * Redis was unreachable, frozen, or answered too late to be useful, or refused the module's Redis user
 * a command or key it needs (an ACL: the message names what to grant; retrying cannot help until it
 * is granted). Never means "busy": the lock's state is unknown. A failed acquire ran nothing under the
 * lock; a failed release, renewal or extend came after the work ran (the message says what is left).
 */
export class LockConnectionError extends DistributedLockError {
  constructor(
    message: string,
    readonly operation: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
