import { DistributedLockError } from '../errors/distributed-lock.error';
import { LockConnectionError } from '../errors/lock-connection.error';

/**
 * The enqueue did not answer within `timeoutMs` (`commandTimeout`, plus time for large arguments: enqueue-bound.ts):
 * it may still have reached Redis (a frozen server).
 */
export function enqueueTimeout(method: string, timeoutMs: number, commandTimeout: number): LockConnectionError {
  const bound = timeoutMs === commandTimeout ? 'commandTimeout' : `commandTimeout ${commandTimeout} ms, plus time to write its arguments`;
  return new LockConnectionError(
    `Redis did not answer the enqueue of ${method} within ${timeoutMs} ms (${bound}): the call was not run here, ` +
      `and whether its job was stored is unknown. Retry the call later; a deferKey makes a retry of the same request one job.`,
    'enqueue',
  );
}

/** The queue's connection was not ready within `timeoutMs`: nothing was handed to BullMQ, so nothing can land later. */
export function enqueueNotSent(method: string, status: string, timeoutMs: number): LockConnectionError {
  return new LockConnectionError(
    `The enqueue of ${method} failed (the defer queue's connection to Redis is ${status}, not ready within ${timeoutMs} ms): ` +
      `the call was not run here and not deferred; nothing was sent. Check that Redis is reachable, and retry the call later.`,
    'enqueue',
  );
}

/** The enqueue failed (Redis unreachable, or the connection dropped with it in flight). Our own errors pass through. */
export function enqueueFailure(method: string, error: unknown): Error {
  if (error instanceof DistributedLockError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new LockConnectionError(
    `The enqueue of ${method} failed (${message}): the call was not run here and most likely not deferred. ` +
      `Check that Redis is reachable, and retry the call later.`,
    'enqueue',
    { cause: error },
  );
}
