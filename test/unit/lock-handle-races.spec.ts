/**
 * Legal calls made concurrently, as application code makes them: a release racing a renewal on the
 * wire or a second release, a waiter whose wait ends just as the key is handed to it, and many
 * acquisitions of one key from one service at once. Each race is made to happen (a reply held back, a
 * call sent right behind another), not hoped for; nothing may be left held, nothing deleted that is
 * another owner's, nothing reported lost that was released.
 */
import { Lock, LockTimeoutError } from '../../lib';
import type { AcquireReply } from '../../lib/redis/redis-lock-store';
import { pollUntil, redisSuite, sleep } from './core-helpers';

describe('lock handles under racing calls', () => {
  const suite = redisSuite();
  const lockName = (key: string) => `test:{${key}}`;

  it('two release() calls at once: one frees the key (here: hands it to the queued waiter), the other resolves false and touches nothing', async () => {
    const holder = await suite.pool.make();
    const other = await suite.pool.make();
    const held = await holder.acquire('twice');
    const waiting = other.acquire('twice', { waitTimeout: 5_000 });
    waiting.catch(() => undefined); // awaited below
    expect(await pollUntil(async () => (await suite.client.llen(`${lockName('twice')}:q`)) === 1, 1_000, 2)).toBe(true);
    const releases = jest.spyOn(holder.engine.store, 'release');
    expect(await Promise.all([held.release(), held.release()])).toEqual([true, false]);
    const next = await waiting;
    expect(releases).toHaveBeenCalledTimes(1);
    expect(await suite.client.get(lockName('twice'))).toBe(next.token);
    expect(next.isHeld()).toBe(true);
    expect(await next.release()).toBe(true);
  });

  it('release() right behind a watchdog renewal on the wire: the key is deleted, the late renewal reply neither revives nor loses the lock', async () => {
    const locks = await suite.pool.make({ ttl: 300 }); // renewed every 100 ms
    const lost: unknown[] = [];
    const lock = await locks.acquire('behind-renewal', { onLockLost: (_l, e) => lost.push(e) });
    const store = locks.engine.store;
    const renewMany = store.renewMany.bind(store);
    let renewal: Promise<Array<boolean | Error>> | undefined;
    let release: Promise<boolean> | undefined;
    let renewalsAtRelease = -1;
    const renewCalls = jest.spyOn(store, 'renewMany').mockImplementationOnce((requests) => {
      renewal = renewMany(requests); // written to the connection: Redis runs it before the release
      renewalsAtRelease = locks.getStats().renewals;
      release = lock.release();
      return renewal;
    });
    expect(await pollUntil(() => release !== undefined, 2_000, 1)).toBe(true);
    // The race happened: the renewal reached Redis while the lock was still ours, then the release.
    expect(await renewal).toEqual([true]);
    expect(await release).toBe(true);
    await sleep(5); // the watchdog has applied the renewal's reply
    expect(await suite.client.exists(lockName('behind-renewal'))).toBe(0);
    expect(lock.isHeld()).toBe(false);
    expect((lock.signal.reason as Error).name).toBe('AbortError'); // ended by the release, not a LockLostError
    expect(lost).toEqual([]);
    expect(locks.getStats().lost).toBe(0);
    await sleep(250); // past the next renewal it would have had
    // The reply of a renewal answered after the release is not counted as a renewal, and none follows.
    expect(locks.getStats().renewals).toBe(renewalsAtRelease);
    expect(renewCalls).toHaveBeenCalledTimes(1);
  });

  it('a waiter whose wait times out just after a release handed it the key gives the key back at once (not after the ttl)', async () => {
    const holder = await suite.pool.make();
    const waiter = await suite.pool.make();
    const third = await suite.pool.make();
    const held = await holder.acquire('late-grant');
    // A service that never waited has no subscription yet: the handover message cannot reach it.
    expect(waiter.engine.wakeChannel.subscribed).toBe(false);
    const store = waiter.engine.store;
    const acquire = store.acquire.bind(store);
    let handedTo: string | null = null;
    // The waiter's first attempt queues it in Redis; its reply is held back until the release has
    // handed it the key and the whole waitTimeout has passed.
    jest.spyOn(store, 'acquire').mockImplementationOnce(async (...args): Promise<AcquireReply> => {
      const reply = await acquire(...args);
      expect(await held.release()).toBe(true);
      handedTo = await suite.client.get(lockName('late-grant'));
      await sleep(60);
      return reply;
    });
    const outcome = await waiter.acquire('late-grant', { waitTimeout: 50 }).catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(LockTimeoutError);
    // The race happened: Redis had handed the key to the waiter's token before its wait ended.
    expect(handedTo).not.toBeNull();
    expect(handedTo).not.toBe(held.token);
    // Given back owner-checked at once: another caller gets it now, not 30 s later when the lease would run out.
    expect(await pollUntil(async () => (await suite.client.exists(lockName('late-grant'))) === 0, 1_000, 2)).toBe(true);
    expect(await suite.client.llen(`${lockName('late-grant')}:q`)).toBe(0);
    const next = await third.tryAcquire('late-grant');
    expect(next).not.toBeNull();
    await next?.release();
  });

  it('many acquire() calls of one key from one service at once: granted one at a time, in call order, with increasing fencing tokens', async () => {
    const locks = await suite.pool.make();
    const granted: Array<{ call: number; fence: number }> = [];
    let holding = 0;
    let overlaps = 0;
    const take = async (call: number) => {
      const lock: Lock = await locks.acquire('one-service', { waitTimeout: 10_000 });
      if (holding++ > 0) overlaps++;
      granted.push({ call, fence: lock.fencingToken });
      await sleep(1);
      holding--;
      await lock.release();
    };
    await Promise.all(Array.from({ length: 12 }, (_, call) => take(call)));
    expect(overlaps).toBe(0);
    expect(granted.map((g) => g.call)).toEqual(Array.from({ length: 12 }, (_, call) => call));
    for (let i = 1; i < granted.length; i++) expect(granted[i].fence).toBeGreaterThan(granted[i - 1].fence);
    expect(await locks.isLocked('one-service')).toBe(false);
  });
});
