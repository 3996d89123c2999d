/**
 * T13 (c): close() racing grants. An acquire sent just before close(), or a release elsewhere that
 * hands the lock to one of our queued waiters while close() runs, must not leave a key held by the
 * closed service: the grant is given back through the normal (owner-checked) release, so a waiter
 * queued elsewhere gets the key at once, and the caller gets LockServiceClosedError. Waiters leave
 * the queue before the connection closes; calls after close are LockServiceClosedError; a lock
 * taken with acquire() is released by its owner during the drain.
 *
 * Each race is made to happen, not hoped for: the reply of the acquire that races close() is held
 * back by a spy until the test has arranged the rest (close already begun, a waiter queued behind,
 * a release already run in Redis). Every check of a key is made long before any TTL could expire it.
 */
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import { performance } from 'perf_hooks';
import { DistributedLockError, Lock, LockLostError, LockService, LockServiceClosedError } from '../../lib';
import type { AcquireReply, RedisLockStore } from '../../lib/redis/redis-lock-store';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { ServicePool, sleep } from '../unit/core-helpers';

const PREFIX = 't13r:';
const LONG_TTL = 30_000;

describe('T13 close() racing acquisitions and handovers', () => {
  let redis: SharedRedis;
  let probe: Redis;
  const pool = new ServicePool(() => redis.url);

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    probe = redis.client();
  });
  afterEach(() => pool.closeAll());
  afterAll(() => redis.stop());

  const lockKey = (key: string) => `${PREFIX}{${key}}`;
  const fenceOf = async (key: string) => Number((await probe.get(`${lockKey(key)}:f`)) ?? 0);
  const make = (options: Parameters<ServicePool['make']>[0] = {}) => pool.make({ keyPrefix: PREFIX, ...options });

  /** Waits (bounded) until `count` waiters have a place in the queue of `key`. */
  async function untilQueued(key: string, count: number): Promise<void> {
    for (let i = 0; i < 400 && (await probe.llen(`${lockKey(key)}:q`)) < count; i++) await sleep(5);
    expect(await probe.llen(`${lockKey(key)}:q`)).toBe(count);
  }

  /**
   * Holds back the reply to the next acquire attempt `service` sends, runs `meanwhile(reply)` (the
   * attempt has been answered by Redis, the caller has not seen it yet), then lets the reply through.
   */
  function beforeNextReply(service: LockService, meanwhile: (reply: AcquireReply, token: string) => Promise<void>): void {
    const store = service.engine.store;
    const send = store.acquire.bind(store);
    jest.spyOn(store, 'acquire').mockImplementationOnce((...args) => send(...args).then(async (reply) => (await meanwhile(reply, args[1]), reply)));
  }

  /** What a promise settled with, without throwing. */
  const outcomeOf = <T>(promise: Promise<T>) =>
    promise.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );

  it('an acquire sent just before close() and granted during it is given back (to the waiter queued behind it) before close returns', async () => {
    const key = 'race:acquire';
    const closing = await make({ ttl: LONG_TTL });
    const other = await make({ ttl: LONG_TTL });
    let closeBegan = false;
    let grantedAfterCloseBegan = false;
    let racingToken = '';
    let waiting: Promise<Lock> | undefined;
    beforeNextReply(closing, async (reply, token) => {
      grantedAfterCloseBegan = reply.acquired && closeBegan;
      racingToken = token;
      // A waiter elsewhere queues behind the grant, before our caller learns of it.
      waiting = other.acquire(key, { waitTimeout: 10_000 });
      await untilQueued(key, 1);
    });
    const fenceBefore = await fenceOf(key);

    const acquiring = outcomeOf(closing.acquire(key));
    const closed = closing.close();
    closeBegan = true;
    const { value, error } = (await acquiring) as { value?: Lock; error?: unknown };
    await closed;
    const closedAt = performance.now();

    // The race happened: Redis granted this acquire, and its reply came after close() began.
    expect(grantedAfterCloseBegan).toBe(true);
    expect(await fenceOf(key)).toBeGreaterThan(fenceBefore);
    // Nothing went wrong: the closed service holds nothing (checked long before the 30 s TTL), the
    // caller got a typed error and no lock, and the key went on to the waiter queued behind the grant.
    expect(await probe.get(lockKey(key))).not.toBe(racingToken);
    expect(value).toBeUndefined();
    expect(error).toBeInstanceOf(LockServiceClosedError);
    expect((error as Error).message).toMatch(/closing/);
    const next = await waiting!;
    expect(performance.now() - closedAt).toBeLessThan(1_000); // handed over, not a 30 s lapse
    expect(await probe.get(lockKey(key))).toBe(next.token);
    expect(next.fencingToken).toBeGreaterThan(fenceBefore);
    await next.release();
  });

  it('a multi-key acquire in flight when close() begins gives back the keys it already took', async () => {
    const closing = await make({ ttl: LONG_TTL });
    let closeBegan = false;
    let firstGrantedAfterCloseBegan = false;
    beforeNextReply(closing, async (reply) => void (firstGrantedAfterCloseBegan = reply.acquired && closeBegan));
    const acquiring = outcomeOf(closing.acquire(['race:multi:a', 'race:multi:b']));
    const closed = closing.close();
    closeBegan = true;
    const outcome = (await acquiring) as { error?: unknown };
    await closed;
    expect(firstGrantedAfterCloseBegan).toBe(true);
    expect(await fenceOf('race:multi:a')).toBeGreaterThan(0);
    expect(outcome.error).toBeInstanceOf(LockServiceClosedError);
    expect(await probe.exists(lockKey('race:multi:a'), lockKey('race:multi:b'))).toBe(0);
  });

  it('a release elsewhere hands the lock to our queued waiter while close() runs: given back to the next waiter, not held by the closed service', async () => {
    const key = 'race:handover';
    const holder = await make({ ttl: LONG_TTL });
    const closing = await make({ ttl: LONG_TTL });
    const next = await make({ ttl: LONG_TTL });
    // One wait first, so the closing service is subscribed and hears the handover as it happens.
    const warmUp = await holder.acquire('race:warm-up');
    const warming = closing.acquire('race:warm-up', { waitTimeout: 5_000 });
    await untilQueued('race:warm-up', 1);
    await warmUp.release();
    await (await warming).release();

    const held = await holder.acquire(key);
    let closeBegan = false;
    let queuedAfterCloseBegan = false;
    let handedOverDuringClose = false;
    let racingToken = '';
    let nextWaiting: Promise<Lock> | undefined;
    beforeNextReply(closing, async (reply, token) => {
      queuedAfterCloseBegan = !reply.acquired && reply.position === 0 && closeBegan;
      racingToken = token;
      nextWaiting = next.acquire(key, { waitTimeout: 10_000 });
      await untilQueued(key, 2);
      // The release runs in Redis (handing the key to our queued waiter) before the waiter saw its reply.
      await held.release();
      handedOverDuringClose = (await probe.get(lockKey(key))) === token && closeBegan;
    });

    const acquiring = outcomeOf(closing.acquire(key, { waitTimeout: 10_000 }));
    const closed = closing.close();
    closeBegan = true;
    const outcome = (await acquiring) as { value?: Lock; error?: unknown };
    await closed;
    const closedAt = performance.now();

    // The race happened: our waiter was queued after close began, and Redis handed it the key during close.
    expect(queuedAfterCloseBegan).toBe(true);
    expect(handedOverDuringClose).toBe(true);
    // Nothing went wrong: the closed service holds nothing (its handed-over lease would last ~3 s), the
    // caller got a typed error, and the key went on to the next waiter at once.
    expect(await probe.get(lockKey(key))).not.toBe(racingToken);
    expect(outcome.value).toBeUndefined();
    expect(outcome.error).toBeInstanceOf(LockServiceClosedError);
    const taken = await nextWaiting!;
    expect(performance.now() - closedAt).toBeLessThan(1_000);
    expect(await probe.get(lockKey(key))).toBe(taken.token);
    await taken.release();
  });

  it('a waiter whose attempt is in flight when close() begins has left the queue when close returns; a later release frees the key', async () => {
    const key = 'race:queue';
    const holder = await make({ ttl: LONG_TTL });
    const closing = await make({ ttl: LONG_TTL });
    const held = await holder.acquire(key);
    let closeBegan = false;
    let queuedAfterCloseBegan = false;
    beforeNextReply(closing, async (reply) => void (queuedAfterCloseBegan = !reply.acquired && reply.position === 0 && closeBegan));

    const acquiring = outcomeOf(closing.acquire(key, { waitTimeout: 10_000 }));
    const closed = closing.close();
    closeBegan = true;
    await closed;

    expect(queuedAfterCloseBegan).toBe(true);
    expect(await probe.llen(`${lockKey(key)}:q`)).toBe(0);
    expect(await probe.zcard(`${lockKey(key)}:w`)).toBe(0);
    expect(await held.release()).toBe(true);
    expect(await probe.exists(lockKey(key))).toBe(0); // not handed to a closed service
    expect(((await acquiring) as { error?: unknown }).error).toBeInstanceOf(LockServiceClosedError);
  });

  it('a waiter asleep in the queue wakes at close(), gets LockServiceClosedError and leaves the queue before close returns', async () => {
    const key = 'race:asleep';
    const holder = await make({ ttl: LONG_TTL });
    // Its own wake-ups (a refresh every 80-100 % of waiterLease / 3: 8 s here) come long after the bound below.
    const closing = await make({ ttl: LONG_TTL, waiterLease: 30_000 });
    const held = await holder.acquire(key);
    const waiting = outcomeOf(closing.acquire(key, { waitTimeout: 10_000 }));
    await untilQueued(key, 1);
    await sleep(50); // subscribed and asleep
    const started = performance.now();
    await closing.close();
    // Woken by close(), not by its own next wake-up; 2 s leaves a loaded machine's stalls apart (was 500 ms).
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(await probe.llen(`${lockKey(key)}:q`)).toBe(0);
    expect(await held.release()).toBe(true);
    expect(await probe.exists(lockKey(key))).toBe(0);
    expect(((await waiting) as { error?: unknown }).error).toBeInstanceOf(LockServiceClosedError);
  });

  it('calls after close() (and new keys during it) are LockServiceClosedError, before any Redis command', async () => {
    const locks = await make();
    await locks.close();
    const fn = jest.fn();
    const calls: Array<Promise<unknown>> = [
      locks.acquire('after:1'),
      locks.tryAcquire('after:1'),
      locks.acquire('after:1', { onBusy: 'fail-fast' }),
      locks.withLock('after:1', fn),
      locks.withLock('after:1', fn, { onBusy: 'fail-fast', fallback: 'skipped' }),
    ];
    for (const call of calls) {
      const error = await call.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockServiceClosedError);
      expect(error).toBeInstanceOf(DistributedLockError);
      expect((error as Error).message).toMatch(/closing or closed/);
      expect((error as Error).message).toMatch(/no new locks are taken/);
    }
    expect(fn).not.toHaveBeenCalled();
    expect(await probe.exists(lockKey('after:1'))).toBe(0);
  });

  it('a lock taken with acquire() stays held and renewed while its owner finishes; the owner releases it during the drain; close waits for that', async () => {
    const locks = await make({ ttl: 600, shutdownTimeout: 10_000 });
    const contender = await make();
    const lock = await locks.acquire('drain:owner');
    let releasedAt: number | undefined;
    const heldDuringDrain: boolean[] = [];
    lock.signal.addEventListener('abort', () => {
      // The owner winds down for longer than the TTL, then releases.
      setTimeout(() => {
        heldDuringDrain.push(lock.isHeld());
        releasedAt = performance.now();
        void lock.release();
      }, 900);
    });
    let contenderEnteredAt: number | undefined;
    const contending = contender.withLock('drain:owner', () => (contenderEnteredAt = performance.now()), { waitTimeout: 10_000 });
    await untilQueued('drain:owner', 1);

    const closing = locks.close();
    await sleep(700); // past the 600 ms TTL: still ours only because the drain renews it
    expect(await probe.get(lockKey('drain:owner'))).toBe(lock.token);
    expect(contenderEnteredAt).toBeUndefined();
    expect(lock.isHeld()).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect((lock.signal.reason as LockLostError).reason).toBe('shutdown');
    await closing;
    await contending;
    expect(heldDuringDrain).toEqual([true]);
    expect(contenderEnteredAt).toBeGreaterThanOrEqual(releasedAt!);
    expect(locks.getStats()).toMatchObject({ released: 1, releaseFailures: 0, lost: 0 });
  });

  it("close() awaited inside work under a lock of the same service returns once the rest is drained; the work's own release then frees the key before the connection closes", async () => {
    const closing = await make({ ttl: LONG_TTL, shutdownTimeout: 3_000 });
    const other = await make({ ttl: LONG_TTL });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      // Other work of the same service, which finishes 300 ms into the shutdown: close() waits for that one.
      const othersLock = await closing.acquire('self:other');
      othersLock.signal.addEventListener('abort', () => void sleep(300).then(() => othersLock.release()));
      let closeTook = 0;
      let heldWhenCloseReturned: string | null = null;
      const started = performance.now();
      const result = await closing.withLock('self:job', async () => {
        // A job that shuts the application down on a fatal error (app.close() runs the same close()).
        await closing.close();
        closeTook = performance.now() - started;
        heldWhenCloseReturned = await probe.get(lockKey('self:job'));
        expect(await probe.exists(lockKey('self:other'))).toBe(0);
        return 'done';
      });
      expect(result).toBe('done');
      // Before: close() waited for its own caller the whole shutdownTimeout (3 s), then left the key to lapse by TTL.
      expect(closeTook).toBeGreaterThanOrEqual(280);
      expect(closeTook).toBeLessThan(2_000);
      expect(heldWhenCloseReturned).not.toBeNull();
      // Released by the work as its callback ended, through the still-open connection: free at once for anyone.
      expect(await probe.exists(lockKey('self:job'))).toBe(0);
      const next = await other.tryAcquire('self:job');
      expect(next).not.toBeNull();
      await next!.release();
      // Then the service finishes closing: a close() from outside waits for that, and nothing was left to lapse.
      await closing.close();
      expect((closing.engine.store as RedisLockStore).client.status).toBe('end');
      expect(closing.getStats()).toMatchObject({ released: 2, releaseFailures: 0, lost: 0 });
      expect(errors.mock.calls.map(([m]) => String(m)).filter((m) => m.includes('after shutdownTimeout'))).toEqual([]);
      await expect(closing.acquire('self:later')).rejects.toBeInstanceOf(LockServiceClosedError);
    } finally {
      errors.mockRestore();
    }
  });

  it('close() called inside work under a lock still waits for that work when it is not awaited there, and bounds it by shutdownTimeout like any work', async () => {
    const closing = await make({ ttl: LONG_TTL, shutdownTimeout: 400 });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      let closed: Promise<void> | undefined;
      const started = performance.now();
      const body = closing.withLock('self:slow', async () => {
        closed = closing.close();
        await sleep(1_000); // outlives shutdownTimeout
      });
      await sleep(50);
      await closed;
      // The caller's lock counts like any work: close() is not held up past shutdownTimeout by it.
      expect(performance.now() - started).toBeLessThan(900);
      await body;
      await closing.close();
      expect((closing.engine.store as RedisLockStore).client.status).toBe('end');
      expect(
        errors.mock.calls.map(([m]) => String(m)).filter((m) => m.includes('"self:slow" was still held by running work after shutdownTimeout')),
      ).toHaveLength(1);
      // Left to lapse by TTL, never deleted under the running work.
      expect(await probe.get(lockKey('self:slow'))).not.toBeNull();
      await probe.del(lockKey('self:slow'));
    } finally {
      errors.mockRestore();
    }
  });
});
