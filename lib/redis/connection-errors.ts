import { DistributedLockError } from '../errors/distributed-lock.error';
import { LockConnectionError } from '../errors/lock-connection.error';
import { aclRefusal } from './acl-refusal';
import { sentinelMisdirection } from './sentinel-misdirection';
import { unknownOutcome } from './unknown-outcome';
import { subscriberModeError } from './user-client-refusal';

const timeouts = new WeakSet<object>();

/** A Redis call that did not settle within its bound (see CommandDeadlines). */
export function timeoutError(operation: string, timeoutMs: number): LockConnectionError {
  const error = new LockConnectionError(
    `Redis did not answer ${operation} within ${timeoutMs} ms (unreachable, frozen or overloaded). ${unknownOutcome(operation)}`,
    operation,
  );
  timeouts.add(error);
  return error;
}

/** Whether `error` is a call's bound running out (timeoutError), not a failure Redis or the transport reported. */
export const isTimeoutError = (error: unknown): boolean => typeof error === 'object' && error !== null && timeouts.has(error);

/**
 * Every failure of the transport or server becomes a `LockConnectionError` (never "busy"): closed
 * connection, refused, frozen server, READONLY after a failover, LOADING, CLUSTERDOWN — the lock
 * state is unknown in all of them. Our own errors pass through unchanged. A connection that
 * reached a Sentinel instead of a primary, a command the user's ACL refuses (acl-refusal.ts), and a
 * client of the user's in subscriber mode are told apart.
 */
export function toConnectionError(operation: string, error: unknown): Error {
  if (error instanceof DistributedLockError) return error;
  const misdirected = sentinelMisdirection(operation, error);
  if (misdirected) return misdirected;
  // Not "check that Redis is reachable": it is, and it will refuse every retry the same way.
  const refused = aclRefusal(operation, error);
  if (refused) return refused;
  const subscriberMode = subscriberModeError(operation, error);
  if (subscriberMode) return subscriberMode;
  const message = error instanceof Error ? error.message : String(error);
  return new LockConnectionError(`Redis ${operation} failed: ${message}. Check that Redis is reachable; the lock state is unknown.`, operation, {
    cause: error,
  });
}
