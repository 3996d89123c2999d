/**
 * Type test, checked by `npm run typecheck` (never run): every `@ts-expect-error` must be needed, or the
 * compiler fails with "Unused '@ts-expect-error' directive", so each line below proves a compile error.
 * Without the `@Locked` typings all the expected errors vanish and this file fails to type-check.
 */
import { Observable, of } from 'rxjs';
import { Deferred, Locked, LockedOptions } from '../../lib';

const dynamicOptions: LockedOptions = { onBusy: 'fail-fast' };

/** Ordinary usage: no friction. */
export class Accepted {
  @Locked('a')
  async plain(): Promise<void> {}

  @Locked('a:<0>')
  async inferred(id: string) {
    return id.length;
  }

  @Locked('a', { onBusy: 'retry', waitTimeout: 1_000 })
  async retry(): Promise<number> {
    return 1;
  }

  @Locked('a', { onBusy: 'throw', ttl: 5_000 })
  async throws(): Promise<string> {
    return 's';
  }

  @Locked('a')
  notAsyncButPromise(): Promise<number> {
    return Promise.resolve(1);
  }

  @Locked('a')
  promiseLike(): PromiseLike<number> {
    return Promise.resolve(1);
  }

  @Locked('a')
  stream(): Observable<number> {
    return of(1);
  }

  @Locked('a', { onBusy: 'fail-fast' })
  async failFastVoid(): Promise<void> {}

  @Locked('a', { onBusy: 'fail-fast' })
  async failFastMaybe(): Promise<number | undefined> {
    return 1;
  }

  @Locked('a', { onBusy: 'fail-fast', fallback: 0 })
  async failFastValue(): Promise<number> {
    return 1;
  }

  @Locked('a', { onBusy: 'fail-fast', fallback: 'busy' })
  async failFastLiteral(): Promise<{ done: true } | 'busy'> {
    return { done: true };
  }

  @Locked('a:<0>', { onBusy: 'fail-fast', fallback: (id: string) => `skipped ${id}` })
  async failFastFunction(id: string): Promise<string> {
    return id;
  }

  @Locked('a', { onBusy: 'fail-fast', fallback: async () => 0 })
  async failFastAsyncFunction(): Promise<number> {
    return 1;
  }

  @Locked('a', { onBusy: 'fail-fast', fallback: () => {} })
  async failFastSideEffect(): Promise<void> {}

  @Locked('a', { onBusy: 'fail-fast' })
  streamFailFast(): Observable<number> {
    return of(1);
  }

  @Locked('a', { onBusy: 'fail-fast', fallback: 0 })
  streamFailFastValue(): Observable<number> {
    return of(1);
  }

  @Locked('a', { onBusy: 'fail-fast', fallback: () => of(0) })
  streamFailFastObservable(): Observable<number> {
    return of(1);
  }

  @Locked('a', dynamicOptions)
  async dynamic(): Promise<number> {
    return 1;
  }
}

/** A method that does not return a Promise or an Observable would become asynchronous behind its callers' backs. */
export class SynchronousRefused {
  // @ts-expect-error synchronous number
  @Locked('a')
  count(): number {
    return 1;
  }

  // @ts-expect-error synchronous, return type inferred
  @Locked('a')
  inferred() {
    return 'x';
  }

  // @ts-expect-error synchronous void
  @Locked('a', { onBusy: 'throw' })
  nothing(): void {}

  // @ts-expect-error synchronous, fail-fast
  @Locked('a', { onBusy: 'fail-fast' })
  tick(): void {}

  // @ts-expect-error synchronous, options of unknown policy
  @Locked('a', dynamicOptions)
  dynamic(): number {
    return 1;
  }

  // @ts-expect-error a generator returns no Promise
  @Locked('a')
  async *items() {
    yield 1;
  }
}

/** 'fail-fast' resolves to the fallback (undefined without one): the declared result must admit it. */
export class FailFastMustAdmitFallback {
  // @ts-expect-error resolves to undefined when busy, declared Promise<number>
  @Locked('a', { onBusy: 'fail-fast' })
  async noFallback(): Promise<number> {
    return 1;
  }

  // @ts-expect-error fallback string, declared Promise<number>
  @Locked('a', { onBusy: 'fail-fast', fallback: 'busy' })
  async wrongValue(): Promise<number> {
    return 1;
  }

  // @ts-expect-error fallback function returns a string, declared Promise<number>
  @Locked('a:<0>', { onBusy: 'fail-fast', fallback: (id: string) => id })
  async wrongFunction(_id: string): Promise<number> {
    return 1;
  }

  // @ts-expect-error a number fallback where callers expect nothing (void)
  @Locked('a', { onBusy: 'fail-fast', fallback: 1 })
  async intoVoid(): Promise<void> {}

  // @ts-expect-error an Observable of numbers cannot emit the string fallback
  @Locked('a', { onBusy: 'fail-fast', fallback: 'busy' })
  streamWrongValue(): Observable<number> {
    return of(1);
  }

  // @ts-expect-error an Observable fallback of strings for an Observable of numbers
  @Locked('a', { onBusy: 'fail-fast', fallback: () => of('busy') })
  streamWrongObservable(): Observable<number> {
    return of(1);
  }
}

/** 'retry' and 'throw' never resolve to a fallback, so they take none. */
export class NoFallbackWithoutFailFast {
  // @ts-expect-error a fallback is meaningless with 'throw'
  @Locked('a', { onBusy: 'throw', fallback: 1 })
  async throws(): Promise<number> {
    return 1;
  }
}

/** 'defer' resolves to a Deferred when the key is busy: the declared result must admit it, and the method must return a Promise. */
export class DeferMustAdmitDeferred {
  @Locked('a:<0>', { onBusy: 'defer' })
  async accepted(id: string): Promise<string | Deferred> {
    return id;
  }

  @Locked('a:<0>', { onBusy: 'defer', deferKey: 'request:<1>', waitTimeout: 100 })
  async acceptedWithKey(_id: string, _requestId: string): Promise<void | Deferred> {}

  // @ts-expect-error resolves to a Deferred when busy, declared Promise<string>
  @Locked('a:<0>', { onBusy: 'defer' })
  async notAdmitted(id: string): Promise<string> {
    return id;
  }

  // @ts-expect-error a deferred call cannot be an Observable (nothing to subscribe to later)
  @Locked('a', { onBusy: 'defer' })
  stream(): Observable<Deferred> {
    return of();
  }

  // @ts-expect-error synchronous, defer
  @Locked('a', { onBusy: 'defer' })
  sync(): Deferred {
    return new Deferred('1', 'X.sync', 'q');
  }

  // @ts-expect-error deferKey is meaningless without 'defer'
  @Locked('a', { onBusy: 'retry', deferKey: 'b' })
  async keyWithoutDefer(): Promise<number> {
    return 1;
  }

  // @ts-expect-error a fallback is meaningless with 'defer'
  @Locked('a', { onBusy: 'defer', fallback: 1 })
  async fallbackWithDefer(): Promise<number | Deferred> {
    return 1;
  }
}
