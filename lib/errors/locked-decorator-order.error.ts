import { DistributedLockError } from './distributed-lock.error';

/**
 * At startup: a decorator written above `@Locked` replaced the locked method with its own wrapper, so its work
 * runs outside the lock. For `@Transactional()` that means the transaction commits after the lock is released
 * and the next holder reads the old state (the oversell comes back).
 */
export class LockedDecoratorOrderError extends DistributedLockError {
  constructor(
    readonly className: string,
    readonly methodName: string,
  ) {
    super(
      `${className}.${methodName}: a decorator written above @Locked wraps the locked method, so it runs outside the lock. ` +
        `If it is @Transactional(), the transaction commits after the lock is released and the next holder reads the old state. ` +
        `Write @Locked first (above @Transactional), so the lock is taken before the transaction begins and released after it commits; ` +
        `or, if that decorator is not a transaction (tracing, caching), pass { allowOuterWrapper: true } to @Locked.`,
    );
  }
}
