/**
 * Callbacks waiting on one AbortSignal, behind a single 'abort' listener per signal.
 *
 * Node's EventTarget walks every listener of a signal on each addEventListener (it looks for a
 * duplicate), so N waiters each adding their own listener to the service's shutdown signal cost
 * O(N²): 10,000 callers queuing on one busy key blocked the event loop for about a second (measured,
 * test/unit/on-abort.spec.ts). Here adding and removing a callback is O(1), whatever the count.
 */
const callbacksOf = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `callback` once when `signal` aborts; returns the function that stops listening. A signal
 * that has already aborted never dispatches 'abort' again, so callers check `signal.aborted` first.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let callbacks = callbacksOf.get(signal);
  if (!callbacks) {
    const set = new Set<() => void>();
    callbacks = set;
    callbacksOf.set(signal, set);
    signal.addEventListener(
      'abort',
      () => {
        callbacksOf.delete(signal);
        // A callback may stop listening for another one (deleting from a Set while iterating it is defined). One
        // that throws does not keep the rest from running: its error is reported as an uncaught exception, as
        // EventTarget reports a listener's.
        for (const call of set) {
          try {
            call();
          } catch (error) {
            queueMicrotask(() => {
              throw error;
            });
          }
        }
        set.clear();
      },
      { once: true },
    );
  }
  // A wrapper per registration: the same function registered twice is called twice, as two waiters are two callbacks.
  const entry = () => callback();
  callbacks.add(entry);
  const set = callbacks;
  return () => void set.delete(entry);
}
