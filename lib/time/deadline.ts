/**
 * `promise`, or the rejection `onTimeout()` makes if it has not settled within `ms`. For a few calls made by
 * another library (BullMQ) that cannot be bounded from inside, and to cut one of our bounded calls shorter (the
 * replica count of an error message); the lock's own Redis calls use CommandDeadlines.
 * The promise is not cancelled: a late rejection is swallowed, a late value ignored.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(onTimeout()), Math.max(0, ms))));
  promise.catch(() => undefined);
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/** Whether `promise` settled within `ms` (its outcome is not reported: callers only bound a wait). */
export async function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const timedOut = new Error('deadline');
  try {
    await withDeadline(promise, ms, () => timedOut);
    return true;
  } catch (error) {
    return error !== timedOut;
  }
}
