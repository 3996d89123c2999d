/**
 * A lease is counted valid for ttl − drift (2 ms + 1 % of ttl, lib/core/lease.ts) minus the round trip,
 * so a ttl of 1 or 2 ms could never be used, and failed as if Redis were unreachable. The smallest
 * ttl accepted is 10 ms, checked wherever a ttl is given: module options, per call, extend(ttl).
 */
import { Lock, LockConnectionError, LockLostError, LockOptionsError, LockService } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { ServicePool } from './core-helpers';

const REASON = /at least 10 ms.*valid for ttl − 2 ms − 1 %/;

describe('the smallest ttl', () => {
  let redis: SharedRedis;
  const pool = new ServicePool(() => redis.url);

  beforeAll(async () => (redis = await RedisProcess.shared()));
  afterEach(() => pool.closeAll());
  afterAll(() => redis.stop());

  it.each([1, 2, 9])('rejects ttl %p in the module options, naming the option and why', (ttl) => {
    const make = () => void new LockService({ redis: redis.url, ttl }).close(); // closed if it was made
    expect(make).toThrow(LockOptionsError);
    expect(make).toThrow(/Invalid option "DistributedLockModule\.ttl"/);
    expect(make).toThrow(REASON);
  });

  it.each([1, 2, 9])('rejects ttl %p per call and in extend(), naming the option and why', async (ttl) => {
    const locks = await pool.make({ watchdog: false });
    const error = await locks.acquire('min:call', { ttl }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockOptionsError);
    expect((error as LockOptionsError).option).toBe('options.ttl');
    expect((error as Error).message).toMatch(REASON);

    const lock = await locks.acquire('min:extend', { ttl: 5_000 });
    const extendError = await lock.extend(ttl).catch((e: unknown) => e);
    expect(extendError).toBeInstanceOf(LockOptionsError);
    expect((extendError as LockOptionsError).option).toBe('extend(ttl)');
    expect((extendError as Error).message).toMatch(REASON);
    expect(lock.isHeld()).toBe(true);
    expect(await lock.release()).toBe(true);
  });

  it('acquires with the minimum, 10 ms, against real Redis, and extend(10) is accepted', async () => {
    const locks = await pool.make({ watchdog: false });
    // Its lease is 8 ms from the send: on a loaded machine the answer can come later, and the lock is then
    // given back with LockConnectionError, as it should be (a full run: "answered ... after 16 ms, beyond
    // its 10 ms lease"). Asked again (bounded) until one answer comes in time: 10 ms is accepted and works.
    let lock: Lock | undefined;
    for (let attempt = 0; attempt < 20 && !lock; attempt++) {
      lock = await locks.acquire('min:ok', { ttl: 10 }).catch((error: unknown) => {
        expect(error).toBeInstanceOf(LockConnectionError);
        expect((error as Error).message).toMatch(/beyond its 10 ms lease/);
        return undefined;
      });
    }
    if (!lock) throw new Error('20 acquires with ttl 10 were all answered after their lease');
    expect(lock.fencingToken).toBeGreaterThan(0);
    // Its lease is 8 ms here: on a loaded machine it may lapse before the release, which then says so.
    await lock.release();

    // extend(10) is accepted (not refused as an option). It brings the lease down to 8 ms from its send, so on a
    // loaded machine its answer can come after that and the lock is then reported lost, as it should be.
    const longer = await locks.acquire('min:extend-to-min', { ttl: 5_000 });
    const extended = await longer.extend(10).then(
      () => 'extended',
      (error: unknown) => (error instanceof LockLostError && error.reason === 'expired' ? 'extended, then lapsed' : error),
    );
    expect(['extended', 'extended, then lapsed']).toContain(extended);
    await longer.release();
  });
});
