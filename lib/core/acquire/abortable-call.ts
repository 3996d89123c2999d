import type { LockKeys } from '../lock-store';
import { onAbort } from '../../time/on-abort';
import { AcquireContext, abandonQuietly, abortReason } from './acquire-context';

/**
 * A Redis call an acquisition of `keys` by `token` makes (an attempt, a handover's confirmation), ended by the
 * caller's `signal` (LockOptions.signal) as `abortable` says, with `abandon` as the late take-back. Without a
 * signal, the call itself: the common path allocates nothing for this.
 */
export function unlessAborted<T>(ctx: AcquireContext, keys: LockKeys, token: string, signal: AbortSignal | undefined, call: Promise<T>): Promise<T> {
  return signal ? abortable(call, signal, () => abandonQuietly(ctx, keys, token)) : call;
}

/**
 * `call`, or a rejection with the signal's reason the moment `signal` aborts (or at once, if it already has), the
 * call still on the wire: a frozen or slow Redis must not hold a caller who gave up for a commandTimeout.
 *
 * Whatever the call may still do in Redis is taken back, owner-checked, twice:
 * - by the caller's error path at once (the `abandon` every failed attempt gets). It is sent on the connection
 *   the call went out on, after it, and Redis runs one connection's commands in order: it cannot overtake the
 *   call, and it is written before the QUIT of a close() that no longer waits for this acquisition;
 * - by `takeBackLate`, once the call settles, whatever its outcome: what the call sent after its first reply ran
 *   after the first take-back (a NOSCRIPT answered by sending the script again; a Redlock attempt without a
 *   majority giving its grants back with the waiter's place kept).
 * The late outcome goes nowhere else: no unhandled rejection, nothing counted twice. When the call settles
 * first, the abort callback is removed (on-abort.ts leaves no listener on the signal once none is left).
 */
export function abortable<T>(call: Promise<T>, signal: AbortSignal, takeBackLate?: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let abandoned = false;
    const giveUp = () => {
      abandoned = true;
      reject(abortReason(signal));
    };
    // An aborted signal never dispatches 'abort' again.
    const stopListening = signal.aborted ? undefined : onAbort(signal, giveUp);
    if (signal.aborted) giveUp();
    const settled = (): boolean => {
      if (abandoned) {
        takeBackLate?.();
        return false;
      }
      stopListening?.();
      return true;
    };
    call.then(
      (value) => {
        if (settled()) resolve(value);
      },
      (error: unknown) => {
        if (settled()) reject(error);
      },
    );
  });
}
