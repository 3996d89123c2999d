/**
 * The testing module keeps locks apart by keyPrefix, as Redis does (a review found every service of a testing
 * module sharing locks whatever its prefix: two components given different prefixes excluded each other in
 * tests and not in production). Its levers act under the module's prefix and take one key, as LockService does.
 */
import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { LockKeyError, LockService, LockTimeoutError } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';
import { MemoryWakeChannel } from '../../lib/testing/memory-wake-channel';

describe('DistributedLockTestingModule: namespaces', () => {
  it('services with different keyPrefixes have different locks; with the same prefix they share them', async () => {
    const testing = new LockTestingController();
    const apiA = testing.createService({ keyPrefix: 'app-a:' });
    const apiB = testing.createService({ keyPrefix: 'app-b:' });
    const otherA = testing.createService({ keyPrefix: 'app-a:' });
    try {
      const held = await apiA.acquire('k');
      const b = await apiB.tryAcquire('k');
      expect(b).not.toBeNull(); // before: null, the key seen as held by app-a's lock
      expect(await otherA.tryAcquire('k')).toBeNull();
      expect(await otherA.isLocked('k')).toBe(true);
      await b!.release();
      await held.release();
    } finally {
      await Promise.all([apiA.close(), apiB.close(), otherA.close()]);
    }
  });

  it("hold, isLocked, waiting and expire act under the module's keyPrefix", async () => {
    const moduleRef = await Test.createTestingModule({ imports: [DistributedLockTestingModule.forRoot({ keyPrefix: 'orders:' })] }).compile();
    await moduleRef.init();
    try {
      const testing = moduleRef.get(LockTestingController);
      const locks = moduleRef.get(LockService);
      const elsewhere = testing.createService({ keyPrefix: 'billing:' });
      const held = testing.hold('42');
      expect(await locks.tryAcquire('42')).toBeNull();
      const other = await elsewhere.tryAcquire('42'); // another namespace: free
      expect(other).not.toBeNull();
      await other!.release();
      await elsewhere.close();
      const waiting = locks.acquire('42', { waitTimeout: 5_000 });
      await new Promise((resolve) => setImmediate(resolve));
      expect(testing.waiting('42')).toBe(1);
      expect(testing.isLocked('42')).toBe(true);
      expect(held.release()).toBe(true);
      const lock = await waiting;
      expect(testing.expire('42')).toBe(true);
      expect(lock.isHeld()).toBe(true); // found out at its next renewal, as in production
    } finally {
      await moduleRef.close();
    }
  });

  it('the levers take one key: a list is refused as LockService.isLocked refuses it', () => {
    const testing = new LockTestingController();
    expect(() => testing.isLocked(['z', 'a'] as never)).toThrow(LockKeyError);
    expect(() => testing.hold(['b', 'a'] as never)).toThrow(/hold\(key\): expected one key \(a string\), got an array/);
  });

  it('a timeout on a key another service of the module holds in this process says so, as on Redis', async () => {
    const testing = new LockTestingController();
    const first = testing.createService();
    const second = testing.createService();
    try {
      const error = (await first.withLock('self', () => second.acquire('self', { waitTimeout: 100 })).catch((e: unknown) => e)) as Error;
      expect(error).toBeInstanceOf(LockTimeoutError);
      expect(error.message).toMatch(
        /held by another LockService of this process \(another lock module on the in-memory locks #\d+ of a testing module\)/,
      );
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });

  // A review found hold() taking a key that had just become free but was promised to a queued call, ahead of it.
  it('hold() does not jump a call queued for a key whose holder lapsed: it is refused, and the call gets the key', async () => {
    jest.useFakeTimers();
    const testing = new LockTestingController();
    const app = testing.createService();
    const other = testing.createService(); // what "another instance" is in production
    try {
      testing.hold('k', { ttl: 1_000 });
      const waiting = app.acquire('k', { waitTimeout: 5_000 });
      waiting.catch(() => undefined); // awaited below; a failure here must fail the test, not the process
      await jest.advanceTimersByTimeAsync(1_000); // the hold's lease ran out; the queued call has not asked again yet
      expect(testing.waiting('k')).toBe(1);
      expect(await other.tryAcquire('k')).toBeNull(); // production's answer: busy, promised to the call ahead
      expect(() => testing.hold('k')).toThrow(/free but promised to a call queued for it/);
      await jest.advanceTimersByTimeAsync(1_000);
      await (await waiting).release();
    } finally {
      await Promise.all([app.close(), other.close()]);
      jest.useRealTimers();
    }
  });

  // The commit review found createService() put under the default prefix while the module had its own: a "second
  // instance of the service" then held the module's keys beside it.
  it("createService() makes a second instance under the module's keyPrefix: it shares the module's locks", async () => {
    const moduleRef = await Test.createTestingModule({ imports: [DistributedLockTestingModule.forRoot({ keyPrefix: 'billing:' })] }).compile();
    await moduleRef.init();
    const testing = moduleRef.get(LockTestingController);
    const second = testing.createService();
    try {
      const held = await moduleRef.get(LockService).acquire('invoice-1');
      expect(await second.tryAcquire('invoice-1')).toBeNull();
      await held.release();
    } finally {
      await second.close();
      await moduleRef.close();
    }
  });

  // The review of the watchdog-off handover found the other way in: the waiter's own attempt finds the lock handed to
  // it (its message lost) and got only what was left of the handed lease, which nothing renews with the watchdog off.
  it('with the watchdog off, a lock the waiter finds handed to it by its own attempt keeps the ttl asked for', async () => {
    const deliver = MemoryWakeChannel.prototype.deliver;
    MemoryWakeChannel.prototype.deliver = () => undefined; // every handover message lost
    const testing = new LockTestingController();
    const holder = testing.createService();
    const waiter = testing.createService({ watchdog: false, waiterLease: 900 });
    try {
      const held = await holder.acquire('k');
      const waiting = waiter.acquire('k', { ttl: 4_000, waitTimeout: 5_000 });
      while (testing.waiting('k') !== 1) await new Promise((resolve) => setTimeout(resolve, 5));
      await held.release();
      const lock = await waiting;
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // past the 900 ms waiter lease it was handed
      expect(lock.isHeld()).toBe(true);
      expect(await holder.tryAcquire('k')).toBeNull();
      expect(await lock.release()).toBe(true);
    } finally {
      MemoryWakeChannel.prototype.deliver = deliver;
      await Promise.all([holder.close(), waiter.close()]);
    }
  });
});
