import { DistributedLockError } from '../errors/distributed-lock.error';
import { LockModuleNotInitializedError } from '../errors/lock-module-not-initialized.error';
import type { LockedLockService } from './lock-service-injection';
import { hasStarted, someModuleNotStarted } from './locked-readiness';
import { LOCK_SERVICE_REF } from './locked.internal-constants';

/**
 * The `LockService` of the application that created `self`, looked up at call time: Nest injects it
 * into every instance of a class with `@Locked` methods (request-scoped ones included), and the
 * explorer attaches it to the instances made at startup. Without one, or before the application
 * was initialised, the call fails: a `@Locked` method never runs unlocked.
 */
export function lockServiceOf(self: unknown, where: string): LockedLockService {
  const isObject = self !== null && (typeof self === 'object' || typeof self === 'function');
  const service = isObject ? ((self as Record<symbol, unknown>)[LOCK_SERVICE_REF] as LockedLockService | undefined) : undefined;
  if (service) {
    if (hasStarted(service)) return service;
    throw new LockModuleNotInitializedError(where);
  }
  // An instance the injector did not reach (a factory provider's) while a lock module waits for init().
  if (isObject && someModuleNotStarted()) throw new LockModuleNotInitializedError(where);
  throw new DistributedLockError(
    `${where} was called, but no LockService is attached to ${isObject ? 'its instance' : 'its receiver (it was called without its instance: bind it)'}. ` +
      `Import DistributedLockModule.forRoot({ redis: ... }) (or forRootAsync) in the application (with isGlobal: false, in the module ` +
      `that declares the class), and let Nest create the instance (instances made with "new" are not found). The method was not run.`,
  );
}
