import { LockServiceClosedError } from '../../errors/lock-service-closed.error';
import type { HandoverChannel } from '../handover-channel';
import type { LockKeys, LockStore } from '../lock-store';

export interface AcquireContext {
  store: LockStore;
  wakeChannel: HandoverChannel;
  /** A handed-over lock counts only once the store confirmed it (Redis `replicaAcks`). */
  confirmsHandovers: boolean;
  waiterLease: number;
  /** Aborts when the service shuts down: every waiter stops at once. */
  shutdown: AbortSignal;
  /** Why a wait that timed out may have waited for its own caller (a lock of this process holds the key), or undefined. */
  heldInProcess(keys: LockKeys): string | undefined;
}

/** What one acquisition did, for its metrics and span (lib/observability): filled in as it goes. */
export interface AcquireTally {
  /** Monotonic ms the acquisition started. */
  readonly startedAt: number;
  /** Acquire scripts sent, over every key. */
  attempts: number;
  /** A first attempt found a key busy and the call waited in its queue. */
  waited: boolean;
}

/** Fire-and-forget, owner-checked clean-up; failures only mean the queue entry or lease lapse by themselves. */
export function abandonQuietly(ctx: AcquireContext, keys: LockKeys, token: string): void {
  ctx.store.abandonQuietly(keys, token);
}

/** The error of a wait (or attempt) that close() ended. */
export const shuttingDown = (keys: LockKeys) => new LockServiceClosedError(keys.key, 'the wait was ended by close()');

/** What a wait its caller's `signal` ended rejects with: the signal's reason, as Node's own APIs do. */
export const abortReason = (signal: AbortSignal): unknown => signal.reason ?? new DOMException('The wait for the lock was aborted.', 'AbortError');

/** Whether `error` is what an acquisition rejects with when the caller's `signal` ended it (abortReason). */
export const abortedBy = (error: unknown, signal: AbortSignal | undefined): boolean => signal?.aborted === true && error === signal.reason;
