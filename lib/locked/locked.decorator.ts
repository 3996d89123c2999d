import 'reflect-metadata';
import { Observable } from 'rxjs';
import { DistributedLockError } from '../errors/distributed-lock.error';
import { describeValue } from '../errors/describe-value';
import { LockKeyError } from '../errors/lock-key.error';
import { LockOptionsError } from '../errors/lock-options.error';
import type { LockOptions } from '../options/lock-options.interface';
import { CompiledKeySource, LockKeySpec, compileKeySource } from '../keys/key-source';
import { LOCK_DEFAULTS } from '../options/lock-defaults';
import { LOCKED_FALLBACK_EXAMPLE, assertFallbackUsed } from '../options/fallback-option';
import { LOCK_OPTION_KEYS } from '../options/known-keys';
import { MAX_LOCK_NAME_LENGTH, MAX_TIMER_MS } from '../options/limits';
import { MANUAL_LOCK_NAME, ResolvedLockOptions, resolveLockOptions } from '../options/resolve-options';
import { injectLockServiceInto } from './lock-service-injection';
import { recordDeferredMethod, type DeferredMethod } from '../defer/deferred-methods';
import { invokeDeferring } from './locked-deferral';
import type {
  DeferLockedMethodDecorator,
  DeferLockedOptions,
  FailFastLockedMethodDecorator,
  FailFastLockedOptions,
  LockedMethodDecorator,
  PolicyUnknownAtCompileTime,
  WaitingLockedOptions,
} from './locked-decorator.types';
import { rejectStandardDecoratorCall } from './standard-decorator-call';
import { rejectSynchronousMethod } from './synchronous-method';
import { LockedMethod, invokeForObservable, invokeForPromise } from './locked-invocation';
import { recordKeySourceMethod } from './request-key-errors';
import { LOCKED_METADATA, LockedMetadata } from './locked.constants';
import { HAS_LOCKED_METHODS, LOCKED_WRAPPERS } from './locked.internal-constants';
import { recordLockedWrapper } from './outer-wrapper-check';
import { recordFallbackWithoutPolicy } from './fallback-policy-check';
import type { LockedOptions } from './locked-options.interface';

/**
 * Runs the method under a distributed lock on the key(s) built from its arguments.
 *
 * ```ts
 * @Locked('coupon:<0>:<1.userId>', { onBusy: 'throw', ttl: 10_000 })
 * async claim(campaignId: string, dto: ClaimDto) { ... }
 * ```
 *
 * - Keys: a template (`<N>` is argument N, `<N.path.to.field>` follows properties, array indexes
 *   included), an array of templates (one multi-key lock), or a function `(...args) => key | keys`
 *   called with the method's `this`. Templates are parsed and checked against the declared
 *   parameters here, at class definition. Resolved values are escaped (`%` → `%25`, `:` → `%3A`) so
 *   different arguments never produce the same key; keys over 1024 bytes are rejected, not hashed.
 * - Works on any provider or controller method whoever calls it (HTTP, `@Cron`, `@OnEvent`,
 *   `@MessagePattern`, other services): the method itself is replaced by a `Proxy` that keeps `this`
 *   and carries every metadata key of the original, so decorators above or below keep working.
 * - The method must return a Promise (the lock is held until it settles) or be declared to return an
 *   `Observable` (the lock is held for each subscription): a synchronous method is a compile error, and a
 *   declared synchronous return type (emitDecoratorMetadata) an error at class definition. Generator methods are refused.
 * - With `onBusy: 'fail-fast'` the method's declared result must admit the fallback (`Promise<T | undefined>`
 *   without one); `'retry'` and `'throw'` never change the result type. With `onBusy: 'defer'` a busy key makes
 *   the call a durable job (module option `defer`) and the method resolves to a `Deferred`: declare `Promise<T | Deferred>`.
 * - Needs `experimentalDecorators` (as NestJS does); a standard (TC39) decorator call is refused with a LockOptionsError.
 * - The `LockService` is found at call time on the instance (Nest injects it, request-scoped instances
 *   included); without it, or before the application is initialised, the call fails and the method does not run.
 */
export function Locked<const F = undefined>(keys: LockKeySpec, options: FailFastLockedOptions<F>): FailFastLockedMethodDecorator<F>;
export function Locked(keys: LockKeySpec, options: DeferLockedOptions): DeferLockedMethodDecorator;
export function Locked(keys: LockKeySpec, options?: WaitingLockedOptions): LockedMethodDecorator;
/** Options whose policy is not known at compile time (a `LockedOptions` variable): the fallback cannot be checked. */
export function Locked<O extends LockedOptions>(keys: LockKeySpec, options: O & PolicyUnknownAtCompileTime<O>): LockedMethodDecorator;
export function Locked(keys: LockKeySpec, options: LockedOptions = {}, ...descriptor: unknown[]): LockedMethodDecorator {
  rejectBareUse(keys, options, descriptor.length > 0);
  return ((target: object, propertyKey: string | symbol, descriptor: PropertyDescriptor) => {
    rejectStandardDecoratorCall(propertyKey, descriptor);
    const className = typeof target === 'function' ? target.name : (target.constructor?.name ?? '(anonymous class)');
    const where = `@Locked on ${className}.${String(propertyKey)}`;
    const original: unknown = descriptor?.value;
    if (typeof original !== 'function') throw new DistributedLockError(`${where}: @Locked decorates methods only.`);
    if (typeof target === 'function') {
      throw new DistributedLockError(
        `${where}: static methods cannot be @Locked (the lock service is found on the instance); use LockService.withLock.`,
      );
    }
    if (LOCKED_WRAPPERS.has(original)) {
      throw new DistributedLockError(
        `${where}: @Locked is applied twice; pass several keys as one array, @Locked(['a:<0>', 'b:<1>']), so they are taken in one canonical order.`,
      );
    }
    rejectGenerators(original, where);
    rejectSynchronousMethod(original, Reflect.getMetadata('design:returntype', target, propertyKey), where);
    const defers = options?.onBusy === 'defer';
    const { onBusy: _onBusy, deferKey, ...nonDeferOptions } = options ?? {};
    if (!defers && deferKey !== undefined) throw new LockOptionsError(`${where} options.deferKey`, `deferKey is only used with onBusy: 'defer'.`);
    // Without an onBusy here, the module's default decides: checked when the module starts (recorded below).
    if (options?.fallback !== undefined && options.onBusy !== undefined) {
      assertFallbackUsed(`${where} options.fallback`, String(options.onBusy), 'given', LOCKED_FALLBACK_EXAMPLE);
    }
    const lockOptions = checkOptions(defers ? nonDeferOptions : options, where);
    const paramTypes = Reflect.getMetadata('design:paramtypes', target, propertyKey) as unknown[] | undefined;
    const declaredArgs = Math.max(paramTypes?.length ?? 0, original.length);
    // Keys first: the metric name below is made from them, and a bad key spec must fail as LockKeyError.
    const keySource: CompiledKeySource = compileKeySource(keys, declaredArgs, where);
    lockOptions.name ??= metricNameOf(keys, className, propertyKey);
    const returnsObservable = isObservableType(Reflect.getMetadata('design:returntype', target, propertyKey));

    const method: LockedMethod = { where, original: original as LockedMethod['original'], keys: keySource, lockOptions, fallback: options.fallback };
    let deferred: DeferredMethod | undefined;
    if (defers) {
      if (returnsObservable) throw new LockOptionsError(`${where} options.onBusy`, `'defer' needs a Promise method, not an Observable one.`);
      const { waitTimeout, ...jobLockOptions } = lockOptions;
      deferred = {
        name: `${className}.${String(propertyKey)}`,
        property: String(propertyKey),
        where,
        original: method.original,
        keys: keySource,
        lockOptions: jobLockOptions,
        waitFirst: waitTimeout,
        deferKey: deferKey === undefined ? undefined : compileKeySource(deferKey, declaredArgs, `${where} deferKey`),
      };
      recordDeferredMethod(target, deferred);
    }
    const wrapper = new Proxy(original, {
      // `name` and `length` are read through to the original by the Proxy itself.
      apply: (_fn, self, args: unknown[]) =>
        deferred
          ? invokeDeferring(method, deferred, self, args)
          : returnsObservable
            ? invokeForObservable(method, self, args)
            : invokeForPromise(method, self, args),
    });
    // Decorators written below @Locked have already put their metadata on the original function;
    // those above will write onto the wrapper. Copy the former so both are visible on the wrapper.
    for (const key of Reflect.getOwnMetadataKeys(original)) Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapper);
    const metadata: LockedMetadata = { keys, options };
    Reflect.defineMetadata(LOCKED_METADATA, metadata, wrapper);
    Reflect.defineMetadata(HAS_LOCKED_METHODS, true, target);
    injectLockServiceInto(target);
    LOCKED_WRAPPERS.add(wrapper);
    recordKeySourceMethod(keySource, wrapper);
    if (deferred?.deferKey) recordKeySourceMethod(deferred.deferKey, wrapper);
    recordLockedWrapper(target, propertyKey, wrapper, options.allowOuterWrapper === true);
    if (options.fallback !== undefined && options.onBusy === undefined) recordFallbackWithoutPolicy(target, where);
    descriptor.value = wrapper;
    return descriptor;
  }) as LockedMethodDecorator;
}

/**
 * `@Locked` written without arguments is itself called as the decorator, `(target, propertyKey, descriptor)`:
 * the function it returns was taken as the new descriptor, which changes nothing, so the method ran unlocked
 * without a word (TypeScript refuses it; plain JavaScript, or a cast, does not). A standard (TC39) decorator
 * call, `(method, context)`, is refused as when `@Locked(...)` is applied that way.
 */
function rejectBareUse(target: unknown, propertyKey: unknown, legacyCall: boolean): void {
  if (legacyCall && (typeof propertyKey === 'string' || typeof propertyKey === 'symbol')) {
    const className =
      typeof target === 'function' ? target.name : ((target as { constructor?: { name?: string } } | null)?.constructor?.name ?? '(anonymous class)');
    throw new LockKeyError(
      `@Locked on ${className}.${String(propertyKey)}: @Locked was applied without arguments, which would leave the method unlocked. ` +
        `Give it the key, e.g. @Locked('order:<0>') (a key template, an array of templates or a key function), and options as a second argument.`,
    );
  }
  rejectStandardDecoratorCall(propertyKey, undefined);
}

/**
 * `lock.name` of a @Locked method without a `name` option: its key template(s), bounded by the code
 * (the resolved keys never are); a key function has no template, so the method names it.
 */
function metricNameOf(keys: LockKeySpec, className: string, propertyKey: string | symbol): string {
  const name = typeof keys === 'function' ? `${className}.${String(propertyKey)}` : typeof keys === 'string' ? keys : keys.join(', ');
  return name.length > MAX_LOCK_NAME_LENGTH ? name.slice(0, MAX_LOCK_NAME_LENGTH) : name;
}

function rejectGenerators(fn: object, where: string): void {
  const kind = (fn as Record<symbol, unknown>)[Symbol.toStringTag];
  if (kind === 'AsyncGeneratorFunction' || kind === 'GeneratorFunction') {
    throw new DistributedLockError(
      `${where}: generator methods cannot be @Locked: the lock would stay held while the consumer pauses between items, and forever if it ` +
        `abandons the iteration. Collect the items in a locked method, or wrap the loop in lockService.withLock(...).`,
    );
  }
}

// Only per-field checks at decoration time: whether retryDelay.max >= min, or minHold <= maxHold, can depend
// on the module defaults (checked on each call).
const DECORATION_BASE: ResolvedLockOptions = {
  ...LOCK_DEFAULTS,
  name: MANUAL_LOCK_NAME,
  maxHold: MAX_TIMER_MS,
  retryDelay: { min: 1, max: MAX_TIMER_MS },
};
const LOCKED_OPTION_KEYS: readonly string[] = [...LOCK_OPTION_KEYS.filter((k) => k !== 'signal'), 'deferKey', 'allowOuterWrapper'];

function checkOptions(options: LockedOptions, where: string): LockOptions {
  resolveLockOptions(DECORATION_BASE, options as LockOptions, `${where} options`, LOCKED_OPTION_KEYS);
  const { fallback: _fallback, allowOuterWrapper, deferKey: _deferKey, ...lockOptions } = options as LockedOptions & LockOptions;
  if (allowOuterWrapper !== undefined && typeof allowOuterWrapper !== 'boolean') {
    throw new LockOptionsError(`${where} options.allowOuterWrapper`, `expected a boolean, got ${describeValue(allowOuterWrapper)}.`);
  }
  return lockOptions;
}

function isObservableType(type: unknown): boolean {
  return typeof type === 'function' && (type === Observable || type.prototype instanceof Observable);
}
