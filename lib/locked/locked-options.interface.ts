import type { LockKeySpec } from '../keys/key-source';
import type { LockOptions, OnBusyPolicy } from '../options/lock-options.interface';

/** `@Locked`'s answers to a busy key: the three of `LockOptions.onBusy`, and `'defer'` (a durable job run later, see DeferModuleOptions). */
export type LockedOnBusyPolicy = OnBusyPolicy | 'defer';

/**
 * Options of `@Locked`. Every field left out inherits the module's default (`DistributedLockModule.forRoot`).
 */
export interface LockedOptions extends Omit<LockOptions, 'onBusy' | 'signal'> {
  /**
   * Policy when the key is held: wait (bounded), throw `LockBusyError`, give up quietly (`'fail-fast'`), or
   * `'defer'`: enqueue the call as a durable job (BullMQ) that a worker runs later under the same lock, and
   * resolve to a `Deferred` now. With `'defer'` and a `waitTimeout`, the call waits that long first.
   * @default 'retry'
   */
  onBusy?: LockedOnBusyPolicy;
  /**
   * With `onBusy: 'defer'`: a key template (or function) naming the logical call, so repeated defers of it
   * (a client retrying a 202) are one job while it is pending and for an hour after it completed.
   * @default undefined (every defer is a new job)
   */
  deferKey?: LockKeySpec;
  /**
   * With `onBusy: 'fail-fast'`: what the method resolves to when the key is busy (the method is not run).
   * A function is called with the method's `this` and arguments and its result is used, so a function
   * cannot itself be the fallback value. For a method returning an Observable, an Observable fallback
   * is subscribed to, `undefined` completes at once, any other value is emitted once. Only with 'fail-fast',
   * given here or as the module's default (then checked when the application starts): with any other policy it
   * would never be used, and is a `LockOptionsError`.
   * @default undefined
   */
  fallback?: unknown;
  /**
   * Let a method-replacing decorator written above `@Locked` wrap it. By default that fails at startup
   * (`LockedDecoratorOrderError`): `@Transactional()` above `@Locked` commits after the lock is released, so the next
   * holder reads the old state. Set it for a wrapper that is not a transaction (tracing, caching).
   * @default false
   */
  allowOuterWrapper?: boolean;
}
