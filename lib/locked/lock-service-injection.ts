import { Inject, Optional } from '@nestjs/common';
import type { Lock } from '../core/lock';
import type { LockEngine } from '../core/lock-engine';
import type { WithLockOptions } from '../options/lock-options.interface';
import { LOCK_SERVICE_REF } from './locked.internal-constants';

/**
 * What `@Locked` uses of the application's `LockService`. Declared here, not imported: locked/ sits
 * below the Nest façade that implements it (the module provides the service under LOCKED_LOCK_SERVICE).
 */
export interface LockedLockService {
  withLock<T, F = undefined>(key: string | readonly string[], fn: (lock: Lock) => T | Promise<T>, options?: WithLockOptions<F>): Promise<T | F>;
  /** @internal */
  readonly engine: LockEngine;
}

/**
 * Provider token for the application's `LockService` as `@Locked` instances receive it
 * (`useExisting: LockService` in `DistributedLockModule`). A token of its own, not the class, so
 * the decorator does not import the service.
 */
export const LOCKED_LOCK_SERVICE = Symbol('distributed-lock:locked-lock-service');

/** Classes already registered. */
const registered = new WeakSet<object>();

/**
 * @internal
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
