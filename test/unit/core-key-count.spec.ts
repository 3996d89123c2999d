/**
 * A lock over at most MAX_KEYS_PER_LOCK (1,000) keys, against a real redis-server: exactly 1,000 are taken and
 * released; one more is a LockKeyError before any Redis command, through every entry point (acquire, tryAcquire,
 * withLock, a `@Locked` key function, nested in a held lock), on Redis and on the testing module's memory store.
 * Before, any number was taken, one round trip per key: 15,000 keys overran a 2 s waitTimeout by 1.4 s, and a
 * route locking `body.ids` spent seconds of Redis per request.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DistributedLockModule, LockKeyError, LockService, Locked } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';
import { commandsServed } from '../harness/command-stats';
import { redisSuite } from './core-helpers';

const LIMIT = 1_000;

/** `n` distinct keys under `name`. */
const keysOf = (name: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${name}:${i}`);
/** The Redis name of each key's lock, with the suites' keyPrefix 'test:' (see lib/redis/lock-redis-keys.ts). */
const redisNames = (keys: readonly string[]): string[] => keys.map((k) => `test:{${k}}`);

@Injectable()
class Orders {
  runs = 0;

  @Locked((ids: string[]) => ids.map((id) => `order:${id}`))
  async settle(ids: string[]): Promise<number> {
    this.runs++;
    return ids.length;
  }
}

describe('how many keys one lock takes, against a real redis-server', () => {
  const suite = redisSuite();

  /** Runs `refuse`, which must reject with a LockKeyError for `count` keys, and checks that Redis served no command meanwhile. */
  async function expectRefusedUnsent(count: number, refuse: () => Promise<unknown>): Promise<LockKeyError> {
    const before = await commandsServed(suite.client);
    const error = await refuse().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LockKeyError);
    expect((error as LockKeyError).keyCount).toBe(count);
    expect((error as LockKeyError).message).toContain(`${count} keys given; one lock takes at most ${LIMIT}`);
    expect(await commandsServed(suite.client)).toBe(before);
    return error as LockKeyError;
  }

  it('acquire: exactly 1,000 distinct keys are taken (each held in Redis with the lock token) and released (all freed); 1,001 are refused before any Redis command', async () => {
    const locks = await suite.pool.make({ ttl: 30_000 });
    const keys = keysOf('acct', LIMIT);
    const before = await commandsServed(suite.client);
    const lock = await locks.acquire(keys);
    // What the refusals are measured with: a lock taken is seen (one command per key at least).
    expect((await commandsServed(suite.client)) - before).toBeGreaterThanOrEqual(LIMIT);
    expect(lock.keys).toHaveLength(LIMIT);
    const names = redisNames(keys);
    expect(await suite.client.mget(names)).toEqual(names.map(() => lock.token));
    expect(await lock.release()).toBe(true);
    expect(await suite.client.exists(names)).toBe(0);
    expect(await locks.isLocked('acct:999')).toBe(false);

    const over = keysOf('acct', LIMIT + 1);
    await expectRefusedUnsent(LIMIT + 1, () => locks.acquire(over));
    await expectRefusedUnsent(LIMIT + 1, () => locks.acquire(over, { onBusy: 'fail-fast' }));
    expect(await suite.client.exists(redisNames(over))).toBe(0);
  });

  it('tryAcquire: 1,000 keys are taken; 1,001 are refused with LockKeyError (not null: they are not busy) before any Redis command', async () => {
    const locks = await suite.pool.make();
    const lock = await locks.tryAcquire(keysOf('try', LIMIT));
    expect(lock?.keys).toHaveLength(LIMIT);
    await lock!.release();
    await expectRefusedUnsent(LIMIT + 1, () => locks.tryAcquire(keysOf('try', LIMIT + 1)));
  });

  it('withLock: over 1,000 keys the work runs holding all of them, freed after; over 1,001 it does not run and nothing is sent', async () => {
    const locks = await suite.pool.make();
    const keys = keysOf('batch', LIMIT);
    const held = await locks.withLock(keys, async () => suite.client.exists(redisNames(keys)));
    expect(held).toBe(LIMIT);
    expect(await suite.client.exists(redisNames(keys))).toBe(0);
    const work = jest.fn();
    await expectRefusedUnsent(LIMIT + 1, () => locks.withLock(keysOf('batch', LIMIT + 1), work));
    expect(work).not.toHaveBeenCalled();
  });

  it('1,001 entries of which 2 are duplicates (999 distinct keys) are refused too: counted as given', async () => {
    const locks = await suite.pool.make();
    const keys = [...keysOf('dup', LIMIT - 1), 'dup:0', 'dup:1'];
    const error = await expectRefusedUnsent(LIMIT + 1, () => locks.acquire(keys));
    expect(error.message).toContain('(duplicates included)');
  });

  it('a list of 10 million entries is refused at once, before any Redis command', async () => {
    const locks = await suite.pool.make();
    const huge = new Array<string>(10_000_000).fill('order:1');
    const before = await commandsServed(suite.client);
    const started = performance.now();
    const refused = await locks.acquire(huge).then(
      () => undefined,
      (e: unknown) => e,
    );
    const ms = performance.now() - started;
    expect(refused).toBeInstanceOf(LockKeyError);
    expect(ms).toBeLessThan(50);
    expect(await commandsServed(suite.client)).toBe(before);
  });

  it('inside a lock that holds most of them, 1,001 keys are still refused: the count is of the list given, borrowed keys included', async () => {
    const locks = await suite.pool.make();
    const outer = keysOf('nest', LIMIT);
    await locks.withLock(outer, async () => {
      await expectRefusedUnsent(LIMIT + 1, () => locks.withLock([...outer, 'nest:extra'], jest.fn()));
      // Within the limit, the held keys are borrowed and only the new one is taken.
      expect(await locks.withLock([...outer.slice(1), 'nest:extra'], async (lock) => lock.keys.length)).toBe(LIMIT);
    });
  });

  it('a @Locked key function returning 1,001 keys: LockKeyError naming the method, the method not run, nothing sent', async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ redis: suite.redis.url, keyPrefix: 'test:' })], providers: [Orders] })
    class AppModule {}
    const app = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app.useLogger(false);
    await app.init();
    try {
      const orders = app.get(Orders);
      expect(await orders.settle(keysOf('id', LIMIT))).toBe(LIMIT);
      const error = await expectRefusedUnsent(LIMIT + 1, () => orders.settle(keysOf('id', LIMIT + 1)));
      expect(error.message).toMatch(/^@Locked on Orders\.settle: the key function's result: 1001 keys given; .*The method was not run\.$/);
      expect(orders.runs).toBe(1);
    } finally {
      await app.close();
    }
  });
});

describe("how many keys one lock takes, on the testing module's in-memory store", () => {
  it('1,000 keys are taken and released; 1,001 are refused with the same LockKeyError, nothing held', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [DistributedLockTestingModule.forRoot({})], providers: [Orders] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    try {
      const locks = app.get(LockService);
      const testing = app.get(LockTestingController);
      const lock = await locks.acquire(keysOf('mem', LIMIT));
      expect(testing.isLocked('mem:999')).toBe(true);
      expect(await lock.release()).toBe(true);
      expect(testing.isLocked('mem:999')).toBe(false);

      const over = keysOf('mem', LIMIT + 1);
      for (const refuse of [() => locks.acquire(over), () => locks.tryAcquire(over), () => locks.withLock(over, jest.fn())]) {
        await expect(refuse()).rejects.toBeInstanceOf(LockKeyError);
        await expect(refuse()).rejects.toMatchObject({ keyCount: LIMIT + 1 });
      }
      await expect(app.get(Orders).settle(keysOf('id', LIMIT + 1))).rejects.toMatchObject({ keyCount: LIMIT + 1 });
      expect(app.get(Orders).runs).toBe(0);
      expect(testing.isLocked('mem:0')).toBe(false);
    } finally {
      await app.close();
    }
  });
});
