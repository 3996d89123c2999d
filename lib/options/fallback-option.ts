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

/** What a busy key does under each policy that never uses a fallback. */
const BUSY_ANSWERS: Readonly<Record<string, string>> = {
  retry: 'is waited for (LockTimeoutError after waitTimeout)',
  throw: 'rejects with LockBusyError',
  defer: 'makes the call a deferred job',
};

/**
 * A fallback is used only when the call's EFFECTIVE onBusy is 'fail-fast': given beside it, or the module's
 * default when none is given. That default is known once the module's options are, so this runs per call for
 * withLock and at startup for @Locked (the decoration can only check an onBusy written next to the fallback).
 * `example`: the call written right, for the message.
 */
export function assertFallbackUsed(where: string, onBusy: string, from: 'given' | 'module default', example: string): void {
  if (onBusy === 'fail-fast') return;
  const busy = BUSY_ANSWERS[onBusy] ?? 'does not resolve to it';
  throw new LockOptionsError(
    where,
    from === 'given'
      ? `a fallback is only used with onBusy: 'fail-fast', not '${onBusy}': with '${onBusy}' a busy key ${busy}, so the fallback would ` +
          `never be used. Give onBusy: 'fail-fast' with it (${example}), or leave the fallback out.`
      : `a fallback is only used with onBusy: 'fail-fast', and no onBusy is given with it, so the module's default applies: ` +
          `'${onBusy}', under which a busy key ${busy}, and the fallback would never be used. Give onBusy: 'fail-fast' with it: ${example}.`,
  );
}

/** The fail-fast calls with a fallback, written right (for the messages above). */
export const WITH_LOCK_FALLBACK_EXAMPLE = "withLock(key, fn, { onBusy: 'fail-fast', fallback })";
export const LOCKED_FALLBACK_EXAMPLE = "@Locked(keys, { onBusy: 'fail-fast', fallback })";
