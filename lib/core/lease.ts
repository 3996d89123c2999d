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
  /**
   * How long the lease ran when last granted, renewed or cut short (ms): `validFor` at the grant (a handed-over
   * lease gets only the waiter's lease), then `ttl`. Whether a renewal is overdue is judged against a third of it.
   */
  period: number;
  deadline: number;
  /** When the watchdog should renew next (monotonic ms). */
  renewAt: number;
  /** A renewal for this lease is on the wire; do not send another. */
  renewalInFlight: boolean;
  /** How many calls that set the key's expiry (renewals, extends) were sent since the grant: the last one's number. */
  expiryCalls: number;
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
  return {
    keys,
    fence,
    ttl,
    period: validFor,
    deadline: leaseEnd(sentAt, validFor),
    renewAt: sentAt + renewIntervalFor(validFor),
    renewalInFlight: false,
    expiryCalls: 0,
  };
}

/**
 * A call that sets the key's expiry to `ttl` (a renewal, an extend) is sent at `sentAt`; returns its
 * number for `renewLease`. Redis may run it any moment from now, so a shorter `ttl` than the lease
 * has left brings the deadline down at once: even if its answer never comes, the key may expire then.
 */
export function expiryCallSent(lease: Lease, ttl: number, sentAt: number): number {
  const end = leaseEnd(sentAt, ttl);
  if (end < lease.deadline) {
    lease.deadline = end;
    lease.period = ttl;
  }
  return ++lease.expiryCalls;
}

/**
 * Records a successful renewal or extension: call number `call`, sent at `sentAt`. Only the last call
 * sent counts: one sent after it runs after it on the key's connection, and its own answer decides
 * (an earlier renewal answered after a shorter extend must not restore the longer lease).
 */
export function renewLease(lease: Lease, ttl: number, sentAt: number, call: number): void {
  if (call !== lease.expiryCalls) return;
  lease.ttl = ttl;
  lease.period = ttl;
  lease.deadline = leaseEnd(sentAt, ttl);
  lease.renewAt = sentAt + renewIntervalFor(ttl);
}
