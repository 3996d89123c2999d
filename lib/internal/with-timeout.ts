import { DistributedLockError } from '../errors/distributed-lock.error';
import { LockConnectionError } from '../errors/lock-connection.error';

/**
 * Bounds one Redis call and turns every failure of the transport or server into a
 * `LockConnectionError` (never "busy"): closed connection, refused, frozen server, READONLY after a
 * failover, LOADING, CLUSTERDOWN — the lock state is unknown in all of them.
 */
export function withTimeout<T>(operation: string, timeoutMs: number, run: () => Promise<T>): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      // After this process was paused, expired timers run before the socket is read: give a reply
      // that is already waiting one turn of the event loop (poll phase) before calling it late.
      setImmediate(() => {
        if (settled) return;
        settled = true;
        reject(timeoutError(operation, timeoutMs));
      });
    }, timeoutMs);
    let promise: Promise<T>;
    try {
      promise = run();
    } catch (error) {
      promise = Promise.reject(error);
    }
    promise.then(
      (value) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        if (settled) return;
        settled = true;
        reject(toConnectionError(operation, error));
      },
    );
  });
}

export function timeoutError(operation: string, timeoutMs: number): LockConnectionError {
  return new LockConnectionError(
    `Redis did not answer ${operation} within ${timeoutMs} ms (unreachable, frozen or overloaded). The lock state is unknown; nothing ran under it.`,
    operation,
  );
}

export function toConnectionError(operation: string, error: unknown): Error {
  if (error instanceof DistributedLockError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new LockConnectionError(`Redis ${operation} failed: ${message}. Check that Redis is reachable; the lock state is unknown.`, operation, { cause: error });
}
