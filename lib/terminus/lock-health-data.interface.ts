/** What `LockHealthIndicator.isHealthy` reports about the LockService (terminus adds `status`). */
export interface LockHealthData extends Record<string, unknown> {
  /** The health probe's round trip in ms (Redlock: of the quorum-th fastest node that can vote); absent when it failed. */
  roundTripMs?: number;
  /**
   * Redlock only: the nodes, and how many can vote now (answered the probe and are past
   * nodeRecoveryDelay). Up with `voting < total` means fault tolerance is lost: fewer further
   * failures now stop every acquire. Down when `voting` is below a majority.
   */
  nodes?: { total: number; voting: number };
  /**
   * The wake channel's subscriber: `idle` (no wait needed it yet), `subscribed`, `disconnected` (down: waiters poll
   * until it is back), `refused` (the Redis user may not use the channel: waiters poll, and the first refusal logs a warning naming the
   * ACL fix; not down) or `closed`.
   */
  wakeChannel: string;
  /** Leases the watchdog keeps renewing. */
  leases: number;
  /** Of those, leases with less than one renewal interval left before their deadline. */
  laggingLeases: number;
  /** Why the check reports down (absent when up). */
  message?: string;
}
