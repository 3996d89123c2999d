import type { CompiledKeySource } from '../keys/key-source';
import type { LockOptions } from '../options/lock-options.interface';

/** What `@Locked(…, { onBusy: 'defer' })` records at decoration: enough for a worker to run the original method later. */
export interface DeferredMethod {
  /**
   * `DeclaringClass.method`: the class whose body has the decorator. Jobs name the class of the instance that
   * deferred the call instead (defer-target.ts); versions before that named jobs by this.
   */
  readonly name: string;
  /** The method's property name, as in `name`. */
  readonly property: string;
  readonly where: string;
  readonly original: (...args: unknown[]) => unknown;
  readonly keys: CompiledKeySource;
  /** Lock options of the method (without `onBusy`): the worker takes the lock with them and `'retry'`. */
  readonly lockOptions: LockOptions;
  /** Wait this long before deferring (`waitTimeout` given with 'defer'); undefined: defer at once when busy. */
  readonly waitFirst?: number;
  /** Idempotency key: repeated defers resolving to the same key are one job. */
  readonly deferKey?: CompiledKeySource;
}

/** Deferring methods by prototype, filled at class definition; the coordinator matches them to instances at startup. */
const byPrototype = new WeakMap<object, DeferredMethod[]>();

export function recordDeferredMethod(prototype: object, method: DeferredMethod): void {
  const list = byPrototype.get(prototype) ?? [];
  list.push(method);
  byPrototype.set(prototype, list);
}

/** Deferring methods of an instance's class and its ancestors. */
export function deferredMethodsOf(instance: object): DeferredMethod[] {
  const found: DeferredMethod[] = [];
  for (
    let p: object | null = Object.getPrototypeOf(instance) as object | null;
    p && p !== Object.prototype;
    p = Object.getPrototypeOf(p) as object | null
  ) {
    found.push(...(byPrototype.get(p) ?? []));
  }
  return found;
}

/** The bounded metric name of a deferring method's lock: its `name` option, else `DeclaringClass.method`. */
export const deferredMetricName = (method: DeferredMethod): string => method.lockOptions.name ?? method.name;
