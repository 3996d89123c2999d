import type { LockLostReason } from '../errors/lock-lost.error';

/** How one acquisition ended: `lock.outcome` of `lock.acquire.attempts` and of the `lock.acquire` span. */
/**
 * `aborted`: the caller's `signal` ended the wait (LockOptions.signal). `closed`: the LockService's close()
 * (a shutdown, every rolling deploy) ended the wait or refused the call; apart from `error`, which means
 * Redis trouble and is alerted on.
 */
export type AcquireOutcome = 'acquired' | 'busy' | 'timeout' | 'aborted' | 'closed' | 'error';

/** What one watchdog renewal found: `lock.outcome` of `lock.renewals`. */
export type RenewalOutcome = 'renewed' | 'lost' | 'error';

/** What happened to a deferred call (`@Locked(…, { onBusy: 'defer' })`): `lock.outcome` of `lock.deferred`. */
export type DeferOutcome = 'enqueued' | 'retried' | 'completed' | 'failed';

/** One finished acquisition, as the engine saw it (times on the monotonic clock, lib/time/clock.ts). */
export interface AcquireRecord {
  /** Bounded metric name of the lock (`LockOptions.name`, the `@Locked` template, or `'manual'`), never the key. */
  readonly name: string;
  readonly outcome: AcquireOutcome;
  readonly startedAt: number;
  readonly endedAt: number;
  /** The first attempt found the key busy and the call waited in the queue. */
  readonly waited: boolean;
  /** Acquire scripts sent (summed over the keys of a multi-key lock). */
  readonly attempts: number;
  /** Fencing token of the lock's first key, when acquired. */
  readonly fencingToken?: number;
}

/**
 * Where the engine reports what operators watch. One small interface so the core never talks to a
 * telemetry library itself; `NO_LOCK_METRICS` when OpenTelemetry is not installed.
 */
export interface LockMetrics {
  acquireFinished(record: AcquireRecord): void;
  /** A lock was released after being held `heldMs` (whether or not Redis still had it). */
  held(name: string, heldMs: number): void;
  /** release() found the lease already gone: the critical section outran its TTL. */
  releaseValidationFailed(name: string): void;
  /** release() rejected (Redis unreachable or too slow, or a key it refuses to touch): the key stays taken until its lease lapses. */
  releaseFailed(name: string): void;
  lost(name: string, reason: LockLostReason): void;
  renewal(name: string, outcome: RenewalOutcome): void;
  /** A deferred call was enqueued, retried (busy key or a throwing method), completed, or failed for good (dead letter). */
  deferred(name: string, outcome: DeferOutcome): void;
  /**
   * A deferred call finished (completed or failed for good) `ms` after the call that made its job run: the enqueue,
   * or a `deferKey` call that retried the job after it failed for good (never the time it sat failed).
   */
  deferDuration(name: string, outcome: 'completed' | 'failed', ms: number): void;
}

const ignore = (): void => undefined;

/** Records nothing: the engine's metrics when `@opentelemetry/api` cannot be loaded. */
export const NO_LOCK_METRICS: LockMetrics = Object.freeze({
  acquireFinished: ignore,
  held: ignore,
  releaseValidationFailed: ignore,
  releaseFailed: ignore,
  lost: ignore,
  renewal: ignore,
  deferred: ignore,
  deferDuration: ignore,
});
