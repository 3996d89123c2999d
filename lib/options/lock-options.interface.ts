import type { LockLostError } from '../errors/lock-lost.error';
import type { LockHandle } from './lock-handle.interface';

/** What to do when the key is held by someone else. */
export type OnBusyPolicy = 'retry' | 'throw' | 'fail-fast';

/** Fallback polling used only while no release notification can reach this waiter. */
export interface RetryDelayOptions {
  /** First fallback delay in ms; doubles per attempt, full jitter. @default 25 */
  min?: number;
  /** Cap of the fallback delay in ms. @default 1000 */
  max?: number;
}

/** Per-call options; every field left out inherits the module's default. */
export interface LockOptions {
  /** Lease in ms (integer 10 … 2,147,483,647). The watchdog renews it every ttl/3 while held. @default 30000 */
  ttl?: number;
  /** Policy when the key is held: wait (bounded), throw `LockBusyError`, or give up quietly. @default 'retry' */
  onBusy?: OnBusyPolicy;
  /** Upper bound of waiting with `'retry'` in ms; 0 means one attempt. @default 5000 */
  waitTimeout?: number;
  /** Renew the lease automatically while held. @default true */
  watchdog?: boolean;
  /** The watchdog stops renewing after this many ms of holding, so a stuck holder cannot keep a key forever. @default 600000 */
  maxHold?: number;
  /**
   * Keep the key at least this many ms after it was acquired, even when the work finished sooner:
   * `release()` then shortens the lease to the remainder instead of deleting the key. For cron jobs
   * on several instances whose timers fire a little apart: without it, an instance firing 50 ms
   * late finds the tick's lock already released and runs the tick again (ShedLock's lockAtLeastFor).
   * Keep it below the job's period. @default 0
   */
  minHold?: number;
  /** Fallback polling delays (see RetryDelayOptions). */
  retryDelay?: RetryDelayOptions;
  /**
   * The `lock.name` attribute of this lock's metrics and span (OpenTelemetry): what KIND of lock it is,
   * e.g. `'order-checkout'`, shared by every key of that kind. Never put the key (an order id, a user id)
   * here: every distinct value is a new time series. `@Locked` defaults it to its key template
   * (`'order:<0>'`), `acquire`/`tryAcquire`/`withLock` to `'manual'`. Not a module-wide default. At most 200 characters.
   * @default 'manual'
   */
  name?: string;
  /**
   * Called once when this lock's lease is lost (in addition to aborting `lock.signal`). Never awaited; errors (a throw, or a rejection of an async callback) are logged.
   * (Method syntax on purpose: a callback annotated `(lock: Lock, …)` is accepted too.)
   */
  onLockLost?(this: void, lock: LockHandle, error: LockLostError): void;
  /**
   * Ends a wait for the lock when it aborts (a request the client gave up on, a job being cancelled):
   * the call rejects at once with the signal's `reason` (an `AbortError` unless you gave another), leaves
   * the key's queue, and gives back the keys of a multi-key lock it had taken. It does not wait for a Redis
   * call already on its way (an attempt, or the confirmation of a handed-over lock, on a frozen or slow
   * Redis): that call is taken back, owner-checked, whatever it still does there (a lock it takes is
   * deleted, a place it takes in the queue left). A lock already held is not affected: release it. Per call
   * only: not a module default, and not an `@Locked` option (one signal would serve every call).
   */
  signal?: AbortSignal;
}

/** Options of `withLock`. */
export interface WithLockOptions<F = undefined> extends LockOptions {
  /**
   * With `onBusy: 'fail-fast'`: what `withLock` resolves to when the key is busy (a function is called for it).
   * Only with 'fail-fast', given beside it or as the module's default: with any other policy it would never be
   * used, and is a `LockOptionsError`. `acquire` and `tryAcquire` take none (their busy answer is null).
   * @default undefined
   */
  fallback?: F | (() => F);
}
