import { encodeDeferredArguments } from '../defer/defer-arguments';
import { deferQueueOf } from '../defer/defer-queue';
import { deferTargetOf } from '../defer/defer-target';
import type { DeferredMethod } from '../defer/deferred-methods';
import { DeferArgumentError } from '../errors/defer-argument.error';
import { DistributedLockError } from '../errors/distributed-lock.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import type { WithLockOptions } from '../options/lock-options.interface';
import { invokeOriginal, nameOwnBusyError, resolveCallKeys, type LockedMethod } from './locked-invocation';
import { lockServiceOf } from './lock-service-of';
import { nameLockError } from './lock-error-names';
import { markErrorSource } from './request-key-errors';

/** The fail-fast fallback of a deferring call: only this call's own busy key resolves to it. */
const BUSY = Symbol('busy');

/**
 * A `'defer'` call: arguments are checked first (DeferArgumentError, nothing enqueued), then the lock is
 * tried (or waited for, with `waitTimeout`); when taken, the method runs here as usual; when the key is busy
 * (or the wait ran out), the call is enqueued and the promise resolves to its `Deferred` at once.
 */
export async function invokeDeferring(m: LockedMethod, d: DeferredMethod, self: unknown, args: unknown[]): Promise<unknown> {
  const service = lockServiceOf(self, m.where);
  const queue = deferQueueOf(service);
  if (!queue) {
    throw new DistributedLockError(
      `${m.where} has onBusy 'defer', but its lock module has no queue: configure DistributedLockModule.forRoot({ redis, defer: {} }). The method was not run.`,
    );
  }
  // Everything a deferral needs is checked before the lock is tried: the answer must not depend on contention.
  try {
    encodeDeferredArguments(args, m.where);
  } catch (error) {
    // Named and marked like a LockKeyError of its keys: for a route handler, its arguments are the request's input.
    if (error instanceof DeferArgumentError) {
      nameLockError(error, m.keys.name);
      markErrorSource(error, m.keys);
    }
    throw error;
  }
  const deferKey = d.deferKey === undefined ? undefined : resolveCallKeys(d.deferKey, self, args);
  const keys = resolveCallKeys(m.keys, self, args);
  const options: WithLockOptions<typeof BUSY> =
    d.waitFirst === undefined
      ? { ...m.lockOptions, onBusy: 'fail-fast', fallback: BUSY }
      : { ...m.lockOptions, onBusy: 'retry', waitTimeout: d.waitFirst };
  // The queue closes alongside the lock service at shutdown: a call that found the key busy just before is
  // answered as the lock service answers calls after close() (LockServiceClosedError, 503 over HTTP). The job
  // is named after `self`'s class, which may inherit the method: the worker runs it on that provider.
  const defer = () =>
    queue.closed
      ? Promise.reject(new LockServiceClosedError(keys[0], 'the application is shutting down: the call was neither run nor deferred'))
      : queue.enqueue(deferTargetOf(self as object, d), args, deferKey);
  let result: unknown;
  // Set once the lock is taken: from then on the method runs (and may have side effects), so no error can
  // mean "busy" any more, not even a LockTimeoutError on this call's own key thrown by a nested call inside.
  let entered = false;
  try {
    result = await service.withLock(
      keys,
      () => {
        entered = true;
        return invokeOriginal(m, self, args);
      },
      options,
    );
  } catch (error) {
    if (!entered && error instanceof LockTimeoutError && keys.includes(error.key)) return defer();
    nameOwnBusyError(error, m, keys);
  }
  return result === BUSY ? defer() : result;
}
