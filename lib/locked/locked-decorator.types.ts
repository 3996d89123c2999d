/* eslint-disable @typescript-eslint/no-explicit-any -- method signatures are matched with any[] parameters, as TypedPropertyDescriptor needs */
import type { Observable } from 'rxjs';
import type { LockOptions } from '../options/lock-options.interface';
import type { Deferred } from '../defer/deferred';
import type { LockKeySpec } from '../keys/key-source';
import type { LockedOptions } from './locked-options.interface';

/** What a `@Locked` method may return: a Promise (the lock is held until it settles) or an Observable (held per subscription). */
export type LockableResult = PromiseLike<unknown> | Observable<unknown>;

/** A method `@Locked` can wrap without changing its type: a synchronous method would silently become asynchronous. */
export type LockableMethod = (...args: any[]) => LockableResult;

/**
 * What `@Locked` returns for `'retry'`/`'throw'` (and for options whose policy is not known at compile time):
 * a compile error on a method whose declared return type is not a Promise/PromiseLike or an Observable.
 */
export type LockedMethodDecorator = <M extends LockableMethod>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => TypedPropertyDescriptor<M> | void;

/**
 * What `@Locked(keys, { onBusy: 'fail-fast', fallback })` returns: as `LockedMethodDecorator`, and the method's
 * declared result must admit what a busy key resolves to (the fallback, `undefined` without one).
 */
export type FailFastLockedMethodDecorator<F> = <M extends LockableMethod>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M> & AdmitsFallback<ReturnType<M>, F>,
) => TypedPropertyDescriptor<M> | void;

/**
 * `unknown` (no constraint) when a method returning `R` may honestly resolve to the fallback `F`; otherwise a type
 * the descriptor cannot match, whose property names the problem in the compiler's message.
 * A Promise method resolves to the (awaited) fallback. An Observable method subscribes to an Observable fallback,
 * emits any other value once, and completes at once for `undefined`.
 */
export type AdmitsFallback<R, F> = [R] extends [Observable<infer V>]
  ? [Awaited<F>] extends [Observable<V> | V | undefined]
    ? unknown
    : FallbackNotInReturnType<Awaited<F>>
  : [Awaited<F>] extends [Awaited<R>]
    ? unknown
    : FallbackNotInReturnType<Awaited<F>>;

/** The shape a fail-fast method fails to match when its return type omits the fallback: the property name is the message. */
export interface FallbackNotInReturnType<F> {
  readonly "@Locked fail-fast: the method's return type must admit the fallback (declare Promise<T | undefined> without a fallback)": F;
}

/** Options of a `'fail-fast'` `@Locked`: the fallback (a value or a function of the method's arguments) is typed. */
export interface FailFastLockedOptions<F> extends Omit<LockedOptions, 'onBusy' | 'fallback' | 'deferKey'> {
  onBusy: 'fail-fast';
  deferKey?: undefined;
  /** What the method resolves to when the key is busy: a value, or a function called with the method's `this` and arguments. */
  fallback?: F | ((this: any, ...args: any[]) => F);
}

/** Options of a waiting (`'retry'`) or throwing (`'throw'`) `@Locked`: a busy key never changes the return type, so no fallback. */
export interface WaitingLockedOptions extends Omit<LockedOptions, 'onBusy' | 'fallback' | 'deferKey'> {
  onBusy?: Exclude<LockOptions['onBusy'], 'fail-fast'>;
  fallback?: undefined;
  deferKey?: undefined;
}

/**
 * `unknown` for options typed as plain `LockedOptions` (a variable passed through a wrapper decorator), whose
 * policy may be any of the three; `never` for an object literal with a known policy, so that a literal always
 * gets the checked overloads (and `{ onBusy: 'throw', fallback }` is refused rather than accepted unchecked).
 */
export type PolicyUnknownAtCompileTime<O extends LockedOptions> = LockedOptions['onBusy'] extends O['onBusy'] ? unknown : never;

/** Options of a deferring `@Locked`: a busy key (or, with `waitTimeout`, a wait that ran out) makes the call a job. */
export interface DeferLockedOptions extends Omit<LockedOptions, 'onBusy' | 'fallback'> {
  onBusy: 'defer';
  fallback?: undefined;
  deferKey?: LockKeySpec;
}

/** What `@Locked(keys, { onBusy: 'defer' })` returns: a Promise method whose declared result admits `Deferred`. */
export type DeferLockedMethodDecorator = <M extends (...args: any[]) => PromiseLike<unknown>>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M> & AdmitsDeferred<ReturnType<M>>,
) => TypedPropertyDescriptor<M> | void;

/** `unknown` when a method returning `R` may resolve to a `Deferred`; otherwise a shape whose property names the problem. */
export type AdmitsDeferred<R> = [Deferred] extends [Awaited<R>] ? unknown : DeferredNotInReturnType;

/** The shape a deferring method fails to match when its return type omits `Deferred`: the property name is the message. */
export interface DeferredNotInReturnType {
  readonly "@Locked defer: the method's return type must admit Deferred (declare Promise<T | Deferred>)": Deferred;
}
