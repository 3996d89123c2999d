/**
 * The worker side of the harness: one JSON object per stdout line, stamped with a clock every
 * process on the host shares, so the parent can order sections from different workers.
 */

/** Writes one JSON line. stdout to a pipe is synchronous on Linux, so a line written before a
 * SIGKILL still reaches the parent. */
export function emit(obj: unknown): void {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

/** Nanoseconds of CLOCK_MONOTONIC (host-wide on Linux, immune to wall-clock jumps), as a bigint
 * string because JSON has no bigint and a double loses nanoseconds. */
export function now(): string {
  return process.hrtime.bigint().toString();
}
