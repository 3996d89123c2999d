/**
 * Non-enumerable property put on every provider/controller instance that has `@Locked` methods,
 * pointing at the `LockService` of the application that created the instance. Per instance, not a
 * process-wide global, so two Nest applications in one process each lock through their own module.
 */
export const LOCK_SERVICE_REF = Symbol('distributed-lock:service');

/** Prototype metadata: the class has `@Locked` methods (the explorer attaches the LockService to its instances). */
export const HAS_LOCKED_METHODS = 'distributed-lock:has-locked-methods';

/** Every wrapper `@Locked` made, so a second `@Locked` on the same method is refused. */
export const LOCKED_WRAPPERS = new WeakSet<object>();
