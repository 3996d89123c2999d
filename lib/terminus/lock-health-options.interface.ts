/** Per-check options of `LockHealthIndicator.isHealthy`. */
export interface LockHealthOptions {
  /**
   * A health-probe round trip slower than this reports down (ms). The probe itself is bounded by
   * `commandTimeout`, like every lock call, so the check never hangs on a frozen Redis.
   * @default half of the module's commandTimeout: slower than that, lock calls have little margin left
   */
  maxRoundTrip?: number;
  /**
   * A renewal of a held lease that failed within this many ms reports down, until a later renewal of that lease
   * succeeds or its lock is released or lost (a lost lock is reported as lost, not as a health fault).
   * @default 60000
   */
  renewalErrorWindow?: number;
}
