/** Host-wide monotonic clock in ms (same CLOCK_MONOTONIC as the workers' `now()` strings). */
export const hrMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** A worker's `now()` stamp (ns as a decimal string) in ms on the same clock as hrMs(). */
export const stampMs = (stamp: string): number => Number(BigInt(stamp)) / 1e6;

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** True while a process with this pid exists (signal 0 only checks). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passed; returns whether it did. */
export async function pollUntil(check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 5): Promise<boolean> {
  const deadline = hrMs() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (hrMs() >= deadline) return false;
    await sleep(everyMs);
  }
}

/**
 * Runs `promise` and reports how it settled, how long it took (`ms`) and when it settled (`at`, on
 * hrMs()). Never rejects, so a fault test can assert on the error and the duration together.
 */
export async function timed<T>(promise: Promise<T>): Promise<{ ms: number; at: number; value?: T; error?: unknown }> {
  const started = hrMs();
  try {
    const value = await promise;
    return { ms: hrMs() - started, at: hrMs(), value };
  } catch (error) {
    return { ms: hrMs() - started, at: hrMs(), error };
  }
}

/**
 * Resolves with when and why `signal` aborted: `at` on hrMs(), `perfAt` on performance.now() (the
 * library's own clock, to compare with a lease deadline). Never reads `lock.signal` again: that
 * getter checks the deadline itself, and the point is that the watchdog notices on its own.
 */
export function abortOf(signal: AbortSignal): Promise<{ at: number; perfAt: number; reason: unknown }> {
  return new Promise((resolve) => {
    const done = () => resolve({ at: hrMs(), perfAt: performance.now(), reason: signal.reason });
    if (signal.aborted) return done();
    signal.addEventListener('abort', done, { once: true });
  });
}
