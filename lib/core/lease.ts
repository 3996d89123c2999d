import type { LockKeys } from './lock-store';

/**
 * One key's lease as this process knows it. `deadline` is on the monotonic clock and counts from
 * the moment the successful request was *sent*, minus a drift margin, so it never outlives the
 * lease Redis holds (Redis may have started the TTL later, never earlier).
 */
export interface Lease {
  readonly keys: LockKeys;
  readonly fence: number;
  ttl: number;
  deadline: number;
  /** When the watchdog should renew next (monotonic ms). */
  renewAt: number;
  /** A renewal for this lease is on the wire; do not send another. */
  renewalInFlight: boolean;
}

/** Clock drift and timer lateness allowance, as Redlock computes it: 1% of the TTL plus 2 ms. */
export const driftFor = (ttl: number): number => Math.floor(ttl * 0.01) + 2;

/** Where a lease granted for `validFor` ms, counted from `since` (monotonic ms), ends for us: less the drift allowance. */
export const leaseEnd = (since: number, validFor: number): number => since + validFor - driftFor(validFor);

/** The watchdog renews at a third of the lease, leaving two more chances before it lapses. */
export const renewIntervalFor = (ttl: number): number => Math.max(1, Math.floor(ttl / 3));

/**
 * A lease Redis granted for `validFor` ms, counted from `sentAt` (a moment no later than the grant),
 * and renewed to `ttl` from then on. `validFor` is less than `ttl` for a lock handed over by a release.
 */
export function newLease(keys: LockKeys, fence: number, ttl: number, sentAt: number, validFor: number = ttl): Lease {
  return { keys, fence, ttl, deadline: leaseEnd(sentAt, validFor), renewAt: sentAt + renewIntervalFor(validFor), renewalInFlight: false };
}

/** Records a successful renewal or extension sent at `sentAt`. */
export function renewLease(lease: Lease, ttl: number, sentAt: number): void {
  lease.ttl = ttl;
  lease.deadline = leaseEnd(sentAt, ttl);
  lease.renewAt = sentAt + renewIntervalFor(ttl);
}
