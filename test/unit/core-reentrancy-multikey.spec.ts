import { Logger } from '@nestjs/common';
import { LockConnectionError, LockTimeoutError } from '../../lib';
import { pollUntil, redisSuite, sleep } from './core-helpers';

/** Redis-side multi-key behaviour; the store-agnostic reentrancy and multi-key cases are in test/shared/lock-behaviour.suite.ts. */
describe('LockService: multi-key locks on Redis', () => {
  const suite = redisSuite();

  describe('multi-key locks', () => {
    /** The token of the one waiter queued on `key` (the multi-key lock's owner token), once it is there. */
    const queuedToken = async (key: string): Promise<string> => {
      expect(await pollUntil(async () => (await suite.client.llen(`test:{${key}}:q`)) === 1, 1_000, 2)).toBe(true);
      return (await suite.client.lrange(`test:{${key}}:q`, 0, 0))[0];
    };

    it('keep the keys taken first renewed while waiting for a later one, longer than their ttl', async () => {
      // 1 s (renewed every 333 ms): with 300 ms a loaded machine's late renewal let part:a lapse before
      // the first look (a full run read null); a key taken first and not renewed still lapses within the 3.5 TTLs watched.
      const TTL = 1_000;
      const holder = await suite.pool.make();
      const multi = await suite.pool.make({ ttl: TTL });
      const third = await suite.pool.make();
      const b = await holder.acquire('part:b', { ttl: 10_000 });
      const waiting = multi.acquire(['part:a', 'part:b'], { waitTimeout: 5_000 });
      waiting.catch(() => undefined); // awaited below; a failed expectation before that must not leave it unhandled
      const token = await queuedToken('part:b');
      // part:a is taken (canonical order) and ours while we wait for part:b.
      expect(await suite.client.get('test:{part:a}')).toBe(token);
      // Wait over 3 TTLs: part:a must never lapse, and nobody else can take it meanwhile.
      const until = performance.now() + 3.5 * TTL;
      let looks = 0;
      while (performance.now() < until) {
        expect(await suite.client.get('test:{part:a}')).toBe(token);
        await sleep(25);
        looks++;
      }
      const other = await third.tryAcquire('part:a');
      expect(other && `another service took part:a (fence ${other.fencingToken}) from a multi-key lock still waiting`).toBeNull();
      expect(multi.getStats().renewals).toBeGreaterThanOrEqual(3);
      expect(await b.release()).toBe(true);
      const both = await waiting;
      expect(both.token).toBe(token);
      expect(both.isHeld()).toBe(true);
      expect(await suite.client.mget('test:{part:a}', 'test:{part:b}')).toEqual([token, token]);
      expect(both.fencingTokens.get('part:b')).toBeGreaterThan(b.fencingToken);
      expect(looks).toBeGreaterThan(10);
      expect(await both.release()).toBe(true);
      expect(await suite.client.exists('test:{part:a}', 'test:{part:b}')).toBe(0);
    });

    it('count maxHold from the moment every key is held, not from the start of the wait for a later key', async () => {
      const holder = await suite.pool.make();
      const multi = await suite.pool.make({ ttl: 600 });
      const third = await suite.pool.make();
      const lost: unknown[] = [];
      const b = await holder.acquire('mh:b', { ttl: 10_000 });
      const waiting = multi.acquire(['mh:a', 'mh:b'], { maxHold: 1_000, waitTimeout: 5_000, onLockLost: (_l, e) => lost.push(e) });
      waiting.catch(() => undefined); // awaited below
      await queuedToken('mh:b');
      await sleep(1_150); // the wait alone outlasts maxHold
      const waitedFrom = performance.now();
      expect(await b.release()).toBe(true);
      const both = await waiting;
      // Held well past the 600 ms ttl from here, inside the 1 s maxHold: before, renewals had stopped
      // during the wait and the lease ran out about 250 ms after the caller got it.
      await sleep(800);
      expect(both.isHeld()).toBe(true);
      expect(lost).toEqual([]);
      const other = await third.tryAcquire('mh:a');
      expect(other && `another service took mh:a ${Math.round(performance.now() - waitedFrom)} ms after the multi-key lock was granted`).toBeNull();
      expect(await both.release()).toBe(true);
    });

    it('do not call onLockLost for an acquisition whose first key was lost while it waited for a later one; it fails instead', async () => {
      const holder = await suite.pool.make();
      // Renewed every 300 ms: a stalled machine does not let ml:a's lease run out (a loss for another reason).
      const multi = await suite.pool.make({ ttl: 900 });
      const lost: unknown[] = [];
      const b = await holder.acquire('ml:b', { ttl: 10_000 });
      const failing = multi.acquire(['ml:a', 'ml:b'], { waitTimeout: 5_000, onLockLost: (_l, e) => lost.push(e) }).catch((e: Error) => e);
      const token = await queuedToken('ml:b');
      expect(await suite.client.get('test:{ml:a}')).toBe(token);
      const renewals = jest.spyOn(multi.engine.store, 'renewMany');
      await suite.client.set('test:{ml:a}', 'someone-else', 'PX', 10_000); // ml:a changes hands under the waiting acquisition
      // The watchdog's renewals (every ttl / 3) find another owner: waited for, not a fixed 350 ms that a loaded
      // machine could outlast (ml:b would then be granted first, and the loss be one of a held lock).
      const notOurs = async (): Promise<boolean> => {
        for (const result of renewals.mock.results) if (result.type === 'return' && (await result.value).includes(false)) return true;
        return false;
      };
      expect(await pollUntil(notOurs, 3_000)).toBe(true);
      expect(await b.release()).toBe(true);
      const error = await failing;
      expect(error).toBeInstanceOf(LockConnectionError);
      expect((error as Error).message).toMatch(/"ml:a", "ml:b" taken first were lost while waiting for the rest \(not-owner\); nothing ran/);
      expect(lost).toEqual([]);
      // Not a held lock lost, nor a release that found its lease gone: nobody held it.
      expect(multi.getStats()).toMatchObject({ lost: 0, releaseFailures: 0 });
      // ml:b, handed to the failed acquisition by b's release, is given back after the failure, not before it returns
      // (read at once, a loaded clean-clone run still found the token there).
      expect(await pollUntil(async () => (await suite.client.get('test:{ml:b}')) !== token, 3_000)).toBe(true);
    });

    it('fail with LockTimeoutError saying what to change when, watchdog off, the first key ran out while a later one stayed held', async () => {
      const holder = await suite.pool.make();
      const multi = await suite.pool.make();
      const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      try {
        const b = await holder.acquire('mt:b', { ttl: 10_000 });
        const failing = multi.acquire(['mt:a', 'mt:b'], { ttl: 200, watchdog: false, waitTimeout: 2_000 }).catch((e: Error) => e);
        const token = await queuedToken('mt:b');
        expect(await suite.client.get('test:{mt:a}')).toBe(token);
        await sleep(500); // mt:a's 200 ms lease runs out: the fault
        expect(await suite.client.exists('test:{mt:a}')).toBe(0);
        expect(await b.release()).toBe(true);
        const error = await failing;
        expect(error).toBeInstanceOf(LockTimeoutError);
        expect((error as Error).message).toMatch(
          /taken first ran out \(ttl 200 ms, watchdog off\).*Use a ttl longer than waitTimeout, or keep the watchdog on/,
        );
        expect(multi.getStats()).toMatchObject({ lost: 0, releaseFailures: 0 });
        expect(warnings.mock.calls.map(([m]) => String(m)).filter((m) => /Stop the guarded work|nothing was deleted/.test(m))).toEqual([]);
        expect(await pollUntil(async () => (await suite.client.exists('test:{mt:b}')) === 0, 500)).toBe(true);
      } finally {
        warnings.mockRestore();
      }
    });

    it('close() past shutdownTimeout does not leave a withLock pending whose release waits for a nested call still running', async () => {
      const locks = await suite.pool.make({ shutdownTimeout: 300 });
      let endNested!: () => void;
      const nestedRuns = new Promise<void>((resolve) => (endNested = resolve));
      const outer = locks.withLock('cl:a', async () => {
        void locks.withLock('cl:a', () => nestedRuns).catch(() => undefined);
      });
      let settled = false;
      void outer.then(() => (settled = true));
      await sleep(50);
      expect(settled).toBe(false); // the release waits for the nested call
      await locks.close();
      expect(await pollUntil(() => settled, 500, 5)).toBe(true);
      endNested();
    });

    it('give the keys taken first back at once when the wait for a later key times out', async () => {
      const TTL = 600;
      const WAIT = 900;
      const holder = await suite.pool.make();
      const multi = await suite.pool.make({ ttl: TTL });
      const third = await suite.pool.make();
      const b = await holder.acquire('tpart:b', { ttl: 10_000 });
      const started = performance.now();
      const failing = multi.acquire(['tpart:a', 'tpart:b'], { waitTimeout: WAIT }).catch((e) => e);
      const token = await queuedToken('tpart:b');
      expect(await suite.client.get('test:{tpart:a}')).toBe(token);
      // Still ours past its first TTL (renewed while waiting), shortly before the timeout.
      await sleep(Math.max(0, started + WAIT - 150 - performance.now()));
      expect(await suite.client.get('test:{tpart:a}')).toBe(token);
      const error = await failing;
      expect(error).toBeInstanceOf(LockTimeoutError);
      expect(error.key).toBe('tpart:b');
      // Given back, not lapsed: renewed at most TTL / 3 ago, the key would have ~2/3 TTL (400 ms) left
      // had it not been given back. The give-back is written before the acquire rejects (the caller does
      // not wait for its reply, so a Redis that stopped answering cannot hold the error back), so it is
      // gone within a round trip or two.
      expect(await pollUntil(async () => (await suite.client.exists('test:{tpart:a}')) === 0, 100, 2)).toBe(true);
      const free = await third.acquire('tpart:a', { onBusy: 'throw' });
      expect(free.isHeld()).toBe(true);
      expect(await pollUntil(async () => (await suite.client.llen('test:{tpart:b}:q')) === 0, 200, 2)).toBe(true);
      expect(await suite.client.get('test:{tpart:b}')).toBe(b.token);
      expect(await free.release()).toBe(true);
      expect(await b.release()).toBe(true);
    });
  });
});
