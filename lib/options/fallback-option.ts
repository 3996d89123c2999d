import { LockOptionsError } from '../errors/lock-options.error';

/**
 * `fallback` is what `withLock` and `@Locked` resolve to, instead of running their work, when onBusy 'fail-fast'
 * finds the key busy. `acquire` and `tryAcquire` run no work to skip: a fallback given to them was ignored, and
 * the caller got null (or an error) where it expected its value.
 */
export function assertNoFallback(call: 'acquire' | 'tryAcquire', options: object | undefined): void {
  if ((options as { fallback?: unknown } | undefined)?.fallback === undefined) return;
  const busy =
    call === 'tryAcquire'
      ? 'resolves to null'
      : "rejects (LockBusyError, or LockTimeoutError after waitTimeout) or, with onBusy: 'fail-fast', resolves to null";
  throw new LockOptionsError(
    `${call} options.fallback`,
    `${call}() takes no fallback and would ignore it: a busy key ${busy}. For a value in place of the work, use ` +
      "withLock(key, fn, { onBusy: 'fail-fast', fallback }); or take tryAcquire()'s null as the busy answer.",
  );
}
