import { LOCKED_FALLBACK_EXAMPLE, assertFallbackUsed } from '../options/fallback-option';
import type { LockedLockService } from './lock-service-injection';

/**
 * Per class prototype: the `where` of each `@Locked` method with a `fallback` and no `onBusy` of its own. Whether its
 * fallback is ever used depends on the module's default onBusy, unknown when the class is defined; an `onBusy`
 * written beside the fallback is checked there and then (locked.decorator.ts).
 */
const FALLBACK_WITHOUT_POLICY = new WeakMap<object, string[]>();

export function recordFallbackWithoutPolicy(prototype: object, where: string): void {
  const methods = FALLBACK_WITHOUT_POLICY.get(prototype);
  if (methods) methods.push(where);
  else FALLBACK_WITHOUT_POLICY.set(prototype, [where]);
}

/**
 * At startup, for an instance and the LockService its calls use: every such method of its classes (inherited ones
 * included) is refused with a LockOptionsError unless that service's default onBusy is 'fail-fast'. Before, the
 * fallback was ignored and each busy call waited or threw instead.
 */
export function assertFallbacksUsed(instance: object, service: LockedLockService): void {
  for (
    let proto: object | null = Object.getPrototypeOf(instance) as object | null;
    proto && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto) as object | null
  ) {
    for (const where of FALLBACK_WITHOUT_POLICY.get(proto) ?? []) assertLockedFallbackUsed(where, service);
  }
}

/** One method's check against its service (also per call, for instances the startup check cannot see: see locked.explorer.ts). */
export function assertLockedFallbackUsed(where: string, service: LockedLockService): void {
  assertFallbackUsed(`${where} options.fallback`, service.engine.settings.defaults.onBusy, 'module default', LOCKED_FALLBACK_EXAMPLE);
}
