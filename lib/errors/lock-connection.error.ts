import { DistributedLockError } from './distributed-lock.error';

/**
 * Redis was unreachable, frozen, or answered too late to be useful. Never means "busy": the lock's
 * state is unknown, so nothing ran under it.
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
