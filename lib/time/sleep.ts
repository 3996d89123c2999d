import { onAbort } from './on-abort';

/**
 * A delay that ends early when `wake` is called or `signal` (or `alsoSignal`: a caller's own) aborts; its timer
 * never keeps the process alive. A signal that has already aborted ends it at once: 'abort' is never dispatched
 * again, so listening alone would sleep the whole delay (a waiter that reached its pause after shutdown began
 * stayed queued through close).
 */
export function interruptibleDelay(ms: number, signal?: AbortSignal, alsoSignal?: AbortSignal): { promise: Promise<void>; wake: () => void } {
  if (signal?.aborted || alsoSignal?.aborted) return { promise: Promise.resolve(), wake: () => undefined };
  let wake!: () => void;
  const promise = new Promise<void>((resolve) => {
    const timer = setTimeout(finish, Math.max(0, ms));
    timer.unref();
    // Every waiter of the service sleeps on the same shutdown signal: onAbort, not one listener each.
    const stopListening = signal ? onAbort(signal, finish) : undefined;
    const stopListeningToo = alsoSignal ? onAbort(alsoSignal, finish) : undefined;
    function finish() {
      clearTimeout(timer);
      stopListening?.();
      stopListeningToo?.();
      resolve();
    }
    wake = finish;
  });
  return { promise, wake };
}

/**
 * Resolves with `value` in the next turn of the event loop (check phase), after every socket read
 * of the current turn has been handled.
 */
export function nextTurn(): Promise<void>;
export function nextTurn<T>(value: T): Promise<T>;
export function nextTurn<T>(value?: T): Promise<T | undefined> {
  return new Promise((resolve) => setImmediate(resolve, value));
}
