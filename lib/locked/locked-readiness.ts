import type { LockedLockService } from './lock-service-injection';

/**
 * Which lock modules have started, so a `@Locked` call made too early says "initialise the
 * application", not "import the module". Nest builds instances (and injects the `LockService`) when
 * the module is compiled, but the module is ready only once its `onModuleInit` ran.
 */

/** Services whose module ran `onModuleInit`: `@Locked` calls may use them. */
const started = new WeakSet<LockedLockService>();
/** Lock modules of this process that were compiled and have neither started nor been closed. */
const compiledNotStarted = new Set<object>();

export function moduleCompiled(module: object): void {
  compiledNotStarted.add(module);
}

export function moduleStarted(module: object, service: LockedLockService): void {
  compiledNotStarted.delete(module);
  started.add(service);
}

export function moduleClosed(module: object): void {
  compiledNotStarted.delete(module);
}

export function hasStarted(service: LockedLockService): boolean {
  return started.has(service);
}

/** True while some lock module of this process is compiled but not initialised (a call's instance may belong to it). */
export function someModuleNotStarted(): boolean {
  return compiledNotStarted.size > 0;
}
