/**
 * Corrupt lock state (a fencing-token key that is not a token, a key of the wrong type) is its own
 * typed error naming the Redis key, never "check that Redis is reachable"; the lock fails closed:
 * nothing is granted, nothing is deleted, and no call ever hands out a token that is not an integer.
 */
import type Redis from 'ioredis';
import { LockService, LockStateError, LockTimeoutError } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil } from '../e2e/workers/support/timing';
import { sleep } from './core-helpers';
import { ServicePool } from './core-helpers';

describe('corrupt lock state', () => {
  let redis: RedisProcess;
  let client: Redis;
  const pool = new ServicePool(() => redis.url);

  beforeAll(async () => {
    redis = await RedisProcess.start();
    client = redis.client();
  });
  afterEach(() => pool.closeAll());
  afterAll(async () => {
    client.disconnect();
    await redis.stop();
  });

  const make = (): Promise<LockService> => pool.make({ keyPrefix: 'ls:', waitTimeout: 300, waiterLease: 300 });

  it.each([
    ['text', 'abc'],
    ['2^53 (tokens could not increase)', '9007199254740992'],
    ['infinity', 'inf'],
    ['a negative number', '-5'],
    ['a fraction', '12.5'],
    ['leading zeros (tokens are compared as text)', '0123'],
  ])('a fencing-token key holding %s: LockStateError naming the key, nothing written', async (_what, value) => {
    const service = await make();
    await client.set('ls:{k}:f', value);
    const error = await service.acquire('k').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockStateError);
    expect((error as LockStateError).redisKey).toBe('ls:{k}:f');
    expect((error as Error).message).toContain(`"ls:{k}:f"`);
    expect((error as Error).message).toContain(`"${value}"`);
    expect((error as Error).message).not.toMatch(/reachable/);
    // Refused before writing: no lock, no queue place, the bad value untouched for the operator to see.
    expect(await client.exists('ls:{k}', 'ls:{k}:q', 'ls:{k}:w')).toBe(0);
    expect(await client.get('ls:{k}:f')).toBe(value);
    await client.del('ls:{k}:f');
    // Deleting the bad key is the documented repair: the next token still comes from the server clock.
    const lock = await service.acquire('k');
    expect(lock.fencingToken).toBeGreaterThan(1e15);
    expect(await lock.release()).toBe(true);
  });

  it('a fencing-token key corrupted while a waiter is queued: the release fails closed, the waiter never gets a token that is not an integer', async () => {
    const holder = await make();
    // A waiter that looks again only about a second later (its place refresh), so the queue is seen as
    // the failed release left it before the waiter's own next attempt runs into the corrupt token too.
    const waiterService = await pool.make({ keyPrefix: 'ls:', waiterLease: 3_000 });
    const held = await holder.acquire('h');
    const waiting = waiterService.acquire('h', { waitTimeout: 3_000 }).catch((e: unknown) => e);
    expect(await pollUntil(async () => (await client.llen('ls:{h}:q')) === 1, 2_000)).toBe(true);
    // An attempt sent before the waiter's service confirmed its subscription is followed by another at
    // once (it could have missed a handover): let that one run before the token is corrupted, or it
    // meets the corrupt token itself, fails, and leaves the queue before the release is looked at.
    expect(await pollUntil(() => waiterService.engine.wakeChannel.subscribedTo('ls:{h}'), 2_000)).toBe(true);
    await sleep(50);
    expect(await client.llen('ls:{h}:q')).toBe(1);
    await client.set('ls:{h}:f', 'inf');

    const error = await held.release().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockStateError);
    // Nothing deleted or handed over: the key is still the holder's until its lease lapses.
    expect(await client.get('ls:{h}')).toBe(held.token);
    expect(await client.llen('ls:{h}:q')).toBe(1);
    const outcome = await waiting;
    expect(outcome).toBeInstanceOf(LockStateError);
    await client.del('ls:{h}', 'ls:{h}:f', 'ls:{h}:q', 'ls:{h}:w');
  });

  it('a lock key of the wrong type: LockStateError, not a connection error', async () => {
    const service = await make();
    await client.rpush('ls:{w}:q', 'x');
    await client.set('ls:{w}:q', 'not a list');
    const error = await service.acquire('w').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockStateError);
    expect((error as Error).message).toContain('wrong type');
    expect(await client.exists('ls:{w}')).toBe(0);
  });

  it('a lock key without an expiry (written by something else): every policy answers LockStateError naming it, nothing written', async () => {
    const service = await make();
    // A string, as a foreign SET would leave it, and a hash: neither expires, so either would block the key for good.
    await client.set('ls:{n}', 'written by another tool');
    await client.hset('ls:{nh}', 'field', 'value');
    for (const [key, redisKey] of [
      ['n', 'ls:{n}'],
      ['nh', 'ls:{nh}'],
    ]) {
      for (const attempt of [() => service.acquire(key, { onBusy: 'throw' }), () => service.acquire(key), () => service.tryAcquire(key)]) {
        const error = await attempt().catch((e: unknown) => e);
        // Before: LockBusyError ("being handed to a queued waiter", where no waiter exists), LockTimeoutError, null.
        expect(error).toBeInstanceOf(LockStateError);
        expect((error as LockStateError).redisKey).toBe(redisKey);
        expect((error as Error).message).toContain(`"${redisKey}" exists without an expiry`);
        expect((error as Error).message).toContain('nothing ran under the lock');
      }
      // Refused before writing: no queue place, no token, the foreign key untouched.
      expect(await client.exists(`${redisKey}:f`, `${redisKey}:q`, `${redisKey}:w`)).toBe(0);
      expect(await client.pttl(redisKey)).toBe(-1);
    }
    expect(await client.get('ls:{n}')).toBe('written by another tool');
    await client.del('ls:{n}', 'ls:{nh}');
    const lock = await service.acquire('n');
    expect(await lock.release()).toBe(true);
  });

  it('a release refused on a key of the wrong type says the lock stays taken, not that nothing ran', async () => {
    const service = await make();
    const lock = await service.acquire('r');
    await client.set('ls:{r}:q', 'not a list');
    const error = await lock.release().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockStateError);
    expect((error as Error).message).toContain('The release failed; the lock was not released: it stays taken until its lease lapses');
    expect((error as Error).message).not.toContain('nothing ran');
    expect(await client.get('ls:{r}')).toBe(lock.token);
    await client.del('ls:{r}', 'ls:{r}:q', 'ls:{r}:f');
  });

  it('a waiter that times out is still a LockTimeoutError (the classification only takes data errors)', async () => {
    const holder = await make();
    const held = await holder.acquire('t');
    const other = await make();
    await expect(other.acquire('t', { waitTimeout: 100 })).rejects.toBeInstanceOf(LockTimeoutError);
    expect(await held.release()).toBe(true);
  });
});
