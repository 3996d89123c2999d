/**
 * Non-enumerable property put on every provider/controller instance that has `@Locked` methods,
 * pointing at the `LockService` of the application that created the instance. Per instance, not a
 * process-wide global, so two Nest applications in one process each lock through their own module.
 */
export const LOCK_SERVICE_REF = Symbol('distributed-lock:service');

/** Prototype metadata: names of the `@Locked` methods of a class (the explorer marks its instances). */
export const LOCKED_METHODS = 'distributed-lock:locked-methods';

/** Every wrapper `@Locked` made, so a second `@Locked` on the same method is refused. */
export const LOCKED_WRAPPERS = new WeakSet<Function>();
