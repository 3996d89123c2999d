/** What `LockHealthIndicator.isHealthy` reports about the LockService (terminus adds `status`). */
export interface LockHealthData extends Record<string, unknown> {
  /** The health probe's round trip in ms (Redlock: until a majority answered); absent when it failed. */
  roundTripMs?: number;
  /** The wake channel's subscriber: `idle` (no wait needed it yet), `subscribed`, `disconnected` or `closed`. */
  wakeChannel: string;
  /** Leases the watchdog keeps renewing. */
  leases: number;
  /** Of those, leases with less than one renewal interval left before their deadline. */
  laggingLeases: number;
  /** Why the check reports down (absent when up). */
  message?: string;
}
