/** Per-check options of `LockHealthIndicator.isHealthy`. */
export interface LockHealthOptions {
  /**
   * A health-probe round trip slower than this reports down (ms). The probe itself is bounded by
   * `commandTimeout`, like every lock call, so the check never hangs on a frozen Redis.
   * @default half of the module's commandTimeout: slower than that, lock calls have little margin left
   */
  maxRoundTrip?: number;
  /** A lease renewal that failed within this many ms (and was not made good by a later one) reports down. @default 60000 */
  renewalErrorWindow?: number;
}
