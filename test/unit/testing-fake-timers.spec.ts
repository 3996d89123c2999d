/**
 * The testing module under Jest's fake timers: leases, waits and renewals follow the faked clock,
 * so a user's test moves a lease to its end with `jest.advanceTimersByTimeAsync` instead of sleeping.
 */
import 'reflect-metadata';
import { LockLostError, LockTimeoutError } from '../../lib';
import { LockTestingController } from '../../lib/testing';

describe('testing module under fake timers', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('a lease without renewal ends when the faked clock passes its ttl; another service then gets the key', async () => {
    const testing = new LockTestingController();
    const a = testing.createService({});
    const b = testing.createService({});
    const lock = await a.acquire('k', { ttl: 60_000, watchdog: false });
    expect(await b.tryAcquire('k')).toBeNull();

    await jest.advanceTimersByTimeAsync(59_000);
    expect(lock.isHeld()).toBe(true);
    expect(await b.tryAcquire('k')).toBeNull();

    await jest.advanceTimersByTimeAsync(1_500);
    expect(lock.isHeld()).toBe(false);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    const next = await b.tryAcquire('k');
    expect(next?.fencingToken).toBeGreaterThan(lock.fencingToken);
    await next!.release();
    await Promise.all([a.close(), b.close()]);
  });

  it('the watchdog keeps a lock for five minutes of faked time, and a bounded wait times out on the faked clock', async () => {
    const testing = new LockTestingController();
    const a = testing.createService({});
    const b = testing.createService({});
    const lock = await a.acquire('k', { ttl: 30_000 });
    await jest.advanceTimersByTimeAsync(300_000);
    expect(lock.isHeld()).toBe(true);

    const waiting = b.acquire('k', { waitTimeout: 10_000 }).catch((e: unknown) => e);
    await jest.advanceTimersByTimeAsync(10_500);
    expect(await waiting).toBeInstanceOf(LockTimeoutError);
    expect(await lock.release()).toBe(true);
    await Promise.all([a.close(), b.close()]);
  });
});
