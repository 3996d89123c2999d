import { DistributedLockError } from '../errors/distributed-lock.error';
import type { LockService } from '../lock.service';
import { LOCK_SERVICE_REF } from './locked.internal-constants';

/**
 * The `LockService` of the application that created `self`, looked up at call time. Without one the
 * call fails: a `@Locked` method never runs unlocked.
 */
export function lockServiceOf(self: unknown, where: string): LockService {
  const service =
    self !== null && (typeof self === 'object' || typeof self === 'function') ? (self as Record<symbol, unknown>)[LOCK_SERVICE_REF] : undefined;
  if (service) return service as LockService;
  throw new DistributedLockError(
    `${where} was called, but no LockService is attached to ${self === undefined || self === null ? 'its receiver (it was called without its instance: bind it)' : 'its instance'}. ` +
      `Import DistributedLockModule.forRoot({ redis: ... }) (or forRootAsync) in the application, and let Nest create the instance ` +
      `(a provider or controller; instances made with "new" and request-scoped providers are not found). The method was not run.`,
  );
}
