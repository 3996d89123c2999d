import { deferredMethodsOf, type DeferredMethod } from './deferred-methods';

/** A deferring method, the (singleton) instance it runs on, and the name its jobs carry. */
export interface DeferTarget {
  /**
   * The job name: `ProviderClass.method`, the class of the instance that deferred the call, so that two
   * providers extending one base class each run their own jobs (the declaring class would name both alike).
   * A declaration overridden further down by another deferring one (both `@Locked(…, { onBusy: 'defer' })`,
   * the override calling `super`) is `ProviderClass.method (DeclaringClass.method)`, apart from the override's.
   */
  readonly name: string;
  readonly instance: object;
  readonly method: DeferredMethod;
}

/**
 * The target of a call deferred by `instance`: computed the same way when a call is enqueued and when the
 * worker lists its providers at startup, so the names meet. The method run is always the declaration that
 * deferred (its original body, as declared), on the instance, never the instance's override: an override
 * ran its own code already, in the call that deferred.
 */
export function deferTargetOf(instance: object, method: DeferredMethod): DeferTarget {
  const className = classNameOf(instance);
  // deferredMethodsOf lists the instance's own class first: the first with this property is the one a call reaches first.
  const outermost = deferredMethodsOf(instance).find((m) => m.property === method.property);
  const name = outermost === method ? `${className}.${method.property}` : `${className}.${method.property} (${method.name})`;
  return { name, instance, method };
}

/** As `@Locked` names a class (locked.decorator.ts), so that a class declaring its own method names its jobs as before. */
function classNameOf(instance: object): string {
  return (Object.getPrototypeOf(instance) as { constructor?: { name?: string } } | null)?.constructor?.name ?? '(anonymous class)';
}
