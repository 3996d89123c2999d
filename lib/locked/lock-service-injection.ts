import { Inject, Optional } from '@nestjs/common';
import { LOCK_SERVICE_REF } from './locked.internal-constants';

/**
 * Provider token for the application's `LockService` as `@Locked` instances receive it
 * (`useExisting: LockService` in `DistributedLockModule`). A token of its own, not the class, so
 * the decorator does not import the service.
 */
export const LOCKED_LOCK_SERVICE = Symbol('distributed-lock:locked-lock-service');

/** Classes already registered. */
const registered = new WeakSet<object>();

/**
 * Asks Nest to inject the application's `LockService` into `LOCK_SERVICE_REF` of every instance of
 * the class, whatever its scope: Nest creates request-scoped and transient instances after startup,
 * one per request or consumer, and injects their properties each time; the explorer only ever sees
 * the instances made at startup. Optional, so an application without the module still boots (the
 * call then fails, saying to import it). Registered once per class (a subclass with @Locked methods
 * of its own registers again: the same property injected twice, harmlessly).
 */
export function injectLockServiceInto(prototype: object): void {
  const owner = prototype.constructor;
  if (registered.has(owner)) return;
  registered.add(owner);
  Inject(LOCKED_LOCK_SERVICE)(prototype, LOCK_SERVICE_REF);
  Optional()(prototype, LOCK_SERVICE_REF);
}
