import type { LockOptions } from '../options/lock-options.interface';

/**
 * Options of `@Locked`. Every field left out inherits the module's default (`DistributedLockModule.forRoot`).
 */
export interface LockedOptions extends LockOptions {
  /**
   * With `onBusy: 'fail-fast'`: what the method resolves to when the key is busy (the method is not run).
   * A function is called with the method's `this` and arguments and its result is used, so a function
   * cannot itself be the fallback value. For a method returning an Observable, an Observable fallback
   * is subscribed to, `undefined` completes at once, any other value is emitted once.
   * @default undefined
   */
  fallback?: unknown;
  /**
   * Let a method-replacing decorator written above `@Locked` wrap it. By default that fails at startup
   * (`LockOrderError`): `@Transactional()` above `@Locked` commits after the lock is released, so the next
   * holder reads the old state. Set it for a wrapper that is not a transaction (tracing, caching).
   * @default false
   */
  allowOuterWrapper?: boolean;
}
