/**
 * Callbacks waiting on one AbortSignal, behind a single 'abort' listener per signal.
 *
 * Node's EventTarget walks every listener of a signal on each addEventListener (it looks for a
 * duplicate), so N waiters each adding their own listener to the service's shutdown signal cost
 * O(N²): 10,000 callers queuing on one busy key blocked the event loop for about a second (measured,
 * test/unit/on-abort.spec.ts). Here adding and removing a callback is O(1), whatever the count.
 */
interface Listening {
  readonly callbacks: Set<() => void>;
  /** The one 'abort' listener on the signal. */
  readonly listener: () => void;
}

const listeningOn = new WeakMap<AbortSignal, Listening>();

/**
 * Calls `callback` once when `signal` aborts; returns the function that stops listening. A signal
 * that has already aborted never dispatches 'abort' again, so callers check `signal.aborted` first.
 * When the last callback stops listening, the signal's listener goes too: a caller's signal may
 * outlive many lock calls (one per request, reused), and must not keep a listener of ours.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let listening = listeningOn.get(signal);
  if (!listening) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      listeningOn.delete(signal);
      // A callback may stop listening for another one (deleting from a Set while iterating it is defined). One
      // that throws does not keep the rest from running: its error is reported as an uncaught exception, as
      // EventTarget reports a listener's.
      for (const call of callbacks) {
        try {
          call();
        } catch (error) {
          queueMicrotask(() => {
            throw error;
          });
        }
      }
      callbacks.clear();
    };
    signal.addEventListener('abort', listener, { once: true });
    listening = { callbacks, listener };
    listeningOn.set(signal, listening);
  }
  // A wrapper per registration: the same function registered twice is called twice, as two waiters are two callbacks.
  const entry = () => callback();
  const { callbacks, listener } = listening;
  callbacks.add(entry);
  return () => {
    if (!callbacks.delete(entry) || callbacks.size > 0) return;
    // Not while the abort is being delivered (that listener is already off the map, and runs once).
    if (listeningOn.get(signal)?.callbacks !== callbacks) return;
    listeningOn.delete(signal);
    signal.removeEventListener('abort', listener);
  };
}
