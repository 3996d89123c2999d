import { Observable, isObservable } from 'rxjs';
import { DistributedLockError } from '../errors/distributed-lock.error';
import type { LockOptions, WithLockOptions } from '../options/lock-options.interface';
import type { CompiledKeySource } from '../keys/key-source';
import { LockBusyError } from '../errors/lock-busy.error';
import { LockKeyError } from '../errors/lock-key.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { nameLockError } from './lock-error-names';
import { markErrorSource } from './request-key-errors';
import { lockServiceOf } from './lock-service-of';
import type { LockedLockService } from './lock-service-injection';
import { assertLockedFallbackUsed } from './fallback-policy-check';
import { deferredWorkKind, discardDeferredWork } from '../core/deferred-work-result';

/** Everything one `@Locked` method needs at call time, computed once at decoration. */
export interface LockedMethod {
  readonly where: string;
  readonly original: (...args: unknown[]) => unknown;
  readonly keys: CompiledKeySource;
  readonly lockOptions: LockOptions;
  readonly fallback: unknown;
}

/**
 * Promise-shaped call: the lock is taken (keys resolved and checked first, before any Redis
 * command), the method runs inside it via `withLock` (so `currentLock()` and reentrancy work),
 * its result is awaited, then the lock is released. A synchronous method therefore becomes
 * asynchronous. Errors thrown by the method (including a nested lock's `LockBusyError`) propagate
 * untouched: `'fail-fast'` only turns this call's own busy key into the fallback.
 */
export async function invokeForPromise(m: LockedMethod, self: unknown, args: unknown[]): Promise<unknown> {
  const service = lockServiceOf(self, m.where);
  const keys = resolveCallKeys(m.keys, self, args);
  const locked = service.withLock(keys, () => invokeOriginal(m, self, args), callOptions(m, service, self, args));
  return locked.catch((error: unknown) => nameOwnBusyError(error, m, keys));
}

/** Runs the original method of a Promise-shaped call (inside its lock) and awaits its result. */
export async function invokeOriginal(m: LockedMethod, self: unknown, args: unknown[]): Promise<unknown> {
  const result: unknown = await Reflect.apply(m.original, self, args);
  if (isObservable(result)) {
    throw new DistributedLockError(
      `${m.where} returned an Observable, but its declared return type is not Observable, so the lock would be released ` +
        `before anyone subscribes. Declare the return type (": Observable<T>", with emitDecoratorMetadata) so the lock is held for the subscription.`,
    );
  }
  const deferred = deferredWorkKind(result);
  if (deferred) {
    discardDeferredWork(result);
    throw new DistributedLockError(
      `${m.where} returned ${deferred}, whose work runs as it is consumed: after the method returned and the lock was released, ` +
        `so it would run unlocked, beside the next holder. Produce the data inside the method and return it (collect the items; ` +
        `read the stream into a Buffer, which a StreamableFile can then send), or take the lock where it is consumed (lockService.withLock around the loop).`,
    );
  }
  return result;
}

/**
 * Observable-shaped call (the method's declared return type is `Observable`): nothing happens until
 * subscription; then the lock is acquired, the method runs inside it and its Observable is
 * subscribed to; the lock is released when that completes, errors, or the subscriber unsubscribes.
 * Completion and error are delivered after the release, so a subscriber that reacts to them finds
 * the key free.
 */
export function invokeForObservable(m: LockedMethod, self: unknown, args: unknown[]): Observable<unknown> {
  return new Observable<unknown>((subscriber) => {
    let finished = false;
    let finish: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (finish = () => ((finished = true), resolve())));
    let inner: { unsubscribe(): void } | undefined;
    let terminal: { error: unknown } | 'complete' | undefined;
    let ran = false;

    const run = async () => {
      const service = lockServiceOf(self, m.where);
      const keys = resolveCallKeys(m.keys, self, args);
      const locked = service.withLock(
        keys,
        () => {
          ran = true;
          if (finished) return; // unsubscribed while waiting for the lock: give it back at once
          const source = Reflect.apply(m.original, self, args);
          if (!isObservable(source)) {
            throw new DistributedLockError(`${m.where} is declared to return an Observable but returned ${typeof source}.`);
          }
          inner = source.subscribe({
            next: (value) => subscriber.next(value),
            error: (error) => ((terminal = { error }), finish()),
            complete: () => ((terminal = 'complete'), finish()),
          });
          if (finished) inner.unsubscribe();
          return done;
        },
        callOptions(m, service, self, args),
      );
      const outcome = await locked.catch((error: unknown) => nameOwnBusyError(error, m, keys));
      if (!ran) return deliverFallback(outcome, subscriber);
      if (terminal === 'complete') subscriber.complete();
      else if (terminal) subscriber.error(terminal.error);
    };
    run().catch((error) => subscriber.error(error));

    return () => {
      finish();
      inner?.unsubscribe();
    };
  });
}

/**
 * The keys of this call. A `LockKeyError` (the arguments make no valid key: a value missing, empty, an object,
 * too long) gets the lock's name, so an HTTP answer can say which lock without showing the offending value. Rethrows.
 */
export function resolveCallKeys(source: CompiledKeySource, self: unknown, args: readonly unknown[]): string[] {
  try {
    return source.resolve(self, args);
  } catch (error) {
    if (error instanceof LockKeyError) {
      nameLockError(error, source.name);
      markErrorSource(error, source);
    }
    throw error;
  }
}

/** A busy or timed-out key of this very call gets the method's lock name, for answers that must not show the key. Rethrows. */
export function nameOwnBusyError(error: unknown, m: LockedMethod, keys: readonly string[]): never {
  if ((error instanceof LockBusyError || error instanceof LockTimeoutError) && keys.includes(error.key)) nameLockError(error, m.keys.name);
  throw error;
}

/** The call's withLock options: the method's, with its fallback (if it has one) computed from this call. */
function callOptions(m: LockedMethod, service: LockedLockService, self: unknown, args: unknown[]): WithLockOptions<unknown> {
  if (m.fallback === undefined) return m.lockOptions;
  // Without an onBusy of its own, the service's default decides whether the fallback is used. Checked at startup
  // for the instances made then (locked.explorer.ts); here too, for those made per request or per consumer.
  if (m.lockOptions.onBusy === undefined) assertLockedFallbackUsed(m.where, service);
  return { ...m.lockOptions, fallback: () => fallbackValue(m, self, args) };
}

function fallbackValue(m: LockedMethod, self: unknown, args: unknown[]): unknown {
  return typeof m.fallback === 'function' ? Reflect.apply(m.fallback, self, args) : m.fallback;
}

function deliverFallback(value: unknown, subscriber: { next(v: unknown): void; complete(): void; error(e: unknown): void }): void {
  if (isObservable(value)) {
    value.subscribe(subscriber);
    return;
  }
  if (value !== undefined) subscriber.next(value);
  subscriber.complete();
}
