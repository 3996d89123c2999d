import { expiryCallSent, leaseEnd, newLease, renewLease } from '../../lib/core/lease';
import { Lock } from '../../lib/core/lock';
import type { LockKeys } from '../../lib/core/lock-store';
import type { ResolvedLockOptions } from '../../lib/options/resolve-options';
import { RedlockStore } from '../../lib/redis/redlock/redlock-store';
import { monotonicNow } from '../../lib/time/clock';
import { simulatedRedlockNodes } from '../harness/simulated-redlock-nodes';

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

describe('extend() refused by the store', () => {
  it('leaves every lease as it was (Redlock: a ttl above nodeRecoveryDelay), so renewals keep the old ttl', async () => {
    const W = 'svcw.1.w';
    const sim = simulatedRedlockNodes(() => ({ holder: W, fence: 41, queue: new Map() }));
    const store = new RedlockStore(sim.nodes, { keyPrefix: 'x:', waiterLease: 3_000, nodeRecoveryDelay: 30_000, nodeTimeout: 2_000 });
    const lease = newLease(store.keysFor('k'), 41, 10_000, monotonicNow());
    const deadline = lease.deadline;
    const runtime = { store, watchdog: { track: () => undefined, untrack: () => undefined }, forget: () => undefined };
    const options = { ttl: 10_000, watchdog: true, maxHold: 3_600_000, minHold: 0, name: 'k' } as unknown as ResolvedLockOptions;
    const lock = Lock.create(W, ['k'], [lease], [], options, runtime as never);
    await expect(lock.extend(60_000)).rejects.toThrow(/longer than nodeRecoveryDelay/);
    expect({ ttl: lease.ttl, calls: lease.expiryCalls, deadline: lease.deadline }).toEqual({ ttl: 10_000, calls: 0, deadline });
  });
});
