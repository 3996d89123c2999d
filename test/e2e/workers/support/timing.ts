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
