import { LockLostError } from '../errors/lock-lost.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';

/** How deep a chain of `cause`s is followed: user code wraps an error once or twice, not more; a cycle must not loop. */
const MAX_CAUSE_DEPTH = 16;

/**
 * Whether `error`, or an error in its `cause` chain, says this instance is shutting down: a lock call refused
 * because close() began (`LockServiceClosedError`: a nested `@Locked`, `withLock`, a deferring call), or a
 * held lock's shutdown notice (`LockLostError`, reason 'shutdown', thrown as is or as the `cause` of an
 * AbortError or of the user's own wrapping error). Such an error says nothing about the work itself: on
 * another instance, not shutting down, the same work would have gone on.
 */
export function causedByShutdown(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < MAX_CAUSE_DEPTH && typeof current === 'object' && current !== null; depth++) {
    if (current instanceof LockServiceClosedError) return true;
    if (current instanceof LockLostError && current.reason === 'shutdown') return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
