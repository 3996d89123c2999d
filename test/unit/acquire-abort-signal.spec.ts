/**
 * LockOptions.signal: a caller that gives up ends its wait at once, leaves the key's queue (so the lock
 * is not handed to nobody), and gives back what a multi-key lock had taken; a lock it already holds is
 * not affected, and a bad value is a typed error before any Redis command.
 */
import { Locked, LockOptionsError, LockService } from '../../lib';
import { lockRedisKeys } from '../../lib/redis/lock-redis-keys';
import { commandCalls, pollUntil, redisSuite, sleep } from './core-helpers';

describe('acquire with a signal (LockOptions.signal)', () => {
  const suite = redisSuite();

  // The pool's services use keyPrefix 'test:'.
  const queueOf = (_service: LockService, key: string) => lockRedisKeys('test:', key);

  it('ends a queued wait when it aborts: rejects with the reason at once, leaves the queue, and the release frees the key', async () => {
    const a = await suite.pool.make({ ttl: 5_000 });
    const b = await suite.pool.make({ ttl: 5_000 });
    const held = await a.acquire('k');
    const controller = new AbortController();
    const waiting = b.acquire('k', { waitTimeout: 20_000, signal: controller.signal });
    const settled = waiting.then(
      () => 'acquired',
      (error: unknown) => error,
    );
    const keys = queueOf(b, 'k');
    // The fault: B is queued in Redis behind A.
    expect(await pollUntil(async () => (await suite.client.llen(keys.queue)) === 1, 2_000)).toBe(true);
    const abortedAt = performance.now();
    controller.abort();
    const error = (await settled) as Error;
    const tookMs = performance.now() - abortedAt;
    expect(error).toBeInstanceOf(DOMException);
    expect(error.name).toBe('AbortError');
    // The pause is interrupted: not the next refresh or the waitTimeout.
    expect(tookMs).toBeLessThan(200);
    // It left the queue, so A's release deletes the key instead of handing it to a caller that is gone.
    expect(await pollUntil(async () => (await suite.client.exists(keys.queue, keys.waiters)) === 0, 2_000)).toBe(true);
    expect(await held.release()).toBe(true);
    expect(await b.isLocked('k')).toBe(false);
  });

  it('the reason given to abort() is what the call rejects with; a waiter behind the one that gave up is served in turn', async () => {
    const a = await suite.pool.make({ ttl: 5_000 });
    const b = await suite.pool.make({ ttl: 5_000 });
    const c = await suite.pool.make({ ttl: 5_000 });
    const held = await a.acquire('k2');
    const controller = new AbortController();
    const bWaits = b.acquire('k2', { waitTimeout: 20_000, signal: controller.signal }).catch((error: unknown) => error);
    const keys = queueOf(b, 'k2');
    expect(await pollUntil(async () => (await suite.client.llen(keys.queue)) === 1, 2_000)).toBe(true);
    const cWaits = c.acquire('k2', { waitTimeout: 20_000 });
    expect(await pollUntil(async () => (await suite.client.llen(keys.queue)) === 2, 2_000)).toBe(true);
    const reason = new Error('the client went away');
    controller.abort(reason);
    expect(await bWaits).toBe(reason);
    await held.release();
    const cLock = await cWaits;
    expect(cLock.isHeld()).toBe(true);
    await cLock.release();
  });

  it('a signal aborted before the call: rejected before any Redis command', async () => {
    const locks = await suite.pool.make();
    const before = await commandCalls(suite.client, 'evalsha');
    const evalBefore = await commandCalls(suite.client, 'eval');
    await expect(locks.acquire('k3', { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    await expect(locks.tryAcquire('k3', { signal: AbortSignal.abort('stop') })).rejects.toBe('stop');
    await expect(locks.withLock('k3', () => 1, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'AbortError' });
    expect(await commandCalls(suite.client, 'evalsha')).toBe(before);
    expect(await commandCalls(suite.client, 'eval')).toBe(evalBefore);
  });

  it('a multi-key lock that gives up while waiting for its second key gives back the first', async () => {
    const a = await suite.pool.make({ ttl: 5_000 });
    const b = await suite.pool.make({ ttl: 5_000 });
    const held = await a.acquire('m:2');
    const controller = new AbortController();
    const waiting = b.acquire(['m:1', 'm:2'], { waitTimeout: 20_000, signal: controller.signal }).catch((error: unknown) => error);
    // The fault: B took m:1 and queues for m:2.
    expect(await pollUntil(async () => (await suite.client.llen(queueOf(b, 'm:2').queue)) === 1, 2_000)).toBe(true);
    expect(await a.isLocked('m:1')).toBe(true);
    controller.abort();
    expect(await waiting).toMatchObject({ name: 'AbortError' });
    expect(await pollUntil(async () => !(await a.isLocked('m:1')), 2_000)).toBe(true);
    await held.release();
  });

  it('a lock already granted is not affected by a later abort', async () => {
    const locks = await suite.pool.make({ ttl: 5_000 });
    const controller = new AbortController();
    const lock = await locks.acquire('k4', { signal: controller.signal });
    controller.abort();
    await sleep(20);
    expect(lock.isHeld()).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect(await locks.isLocked('k4')).toBe(true);
    expect(await lock.release()).toBe(true);
  });

  it('not an AbortSignal, a module default or an @Locked option: LockOptionsError saying so', async () => {
    const locks = await suite.pool.make();
    await expect(locks.acquire('k5', { signal: 'abort' as never })).rejects.toThrow(
      /Invalid option "options\.signal": expected an AbortSignal \(an AbortController's signal\), got the string "abort"\./,
    );
    await expect(locks.acquire('k5', { signal: new AbortController() as never })).rejects.toBeInstanceOf(LockOptionsError);
    expect(() => new LockService({ redis: suite.redis.url, signal: new AbortController().signal } as never)).toThrow(
      /"DistributedLockModule options\.signal": is not an option/,
    );
    expect(() => {
      class Jobs {
        @Locked('job', { signal: new AbortController().signal } as never)
        async run(): Promise<void> {}
      }
      return Jobs;
    }).toThrow(/signal": is not an option/);
  });
});
