import { expiryCallSent, leaseEnd, newLease, renewLease } from '../../lib/core/lease';
import type { LockKeys } from '../../lib/core/lock-store';

/** Calls that set a key's expiry (renewals, extends) and the lease the holder counts on. */
describe('lease expiry calls', () => {
  const keys = { key: 'k', lock: 'lock:{k}' } as LockKeys;

  it('only the last call sent counts: an earlier answer read later does not restore its longer lease', () => {
    const lease = newLease(keys, 1, 3_000, 0);
    const renewal = expiryCallSent(lease, 3_000, 1_000); // the watchdog's renewal
    const extend = expiryCallSent(lease, 400, 1_001); // extend(400), run by Redis after the renewal
    renewLease(lease, 400, 1_001, extend);
    renewLease(lease, 3_000, 1_000, renewal);
    expect(lease.deadline).toBe(leaseEnd(1_001, 400));
    expect(lease.ttl).toBe(400);
  });

  it('a shorter call brings the deadline down when it is sent, before (or without) its answer', () => {
    const lease = newLease(keys, 1, 3_000, 0);
    expiryCallSent(lease, 400, 1_000);
    expect(lease.deadline).toBe(leaseEnd(1_000, 400));
    // A longer one counts only once answered.
    const longer = expiryCallSent(lease, 10_000, 1_100);
    expect(lease.deadline).toBe(leaseEnd(1_000, 400));
    renewLease(lease, 10_000, 1_100, longer);
    expect(lease.deadline).toBe(leaseEnd(1_100, 10_000));
  });
});
