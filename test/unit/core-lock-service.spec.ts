import { Logger } from '@nestjs/common';
import { resolveDeferOptions } from '../../lib/defer/resolve-defer-options';
import {
  DistributedLockError,
  LockBusyError,
  LockConnectionError,
  LockKeyError,
  LockLostError,
  LockOptionsError,
  LockService,
  LockTimeoutError,
} from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { commandCalls, pollUntil, redisSuite, sleep } from './core-helpers';

describe('LockService against a real redis-server: acquire, release, validation', () => {
  const suite = redisSuite();

  describe('acquire and release', () => {
    it('sets token and expiry in one step and frees only its own lock', async () => {
      const locks = await suite.pool.make({ ttl: 5_000 });
      const lock = await locks.acquire('order:1');
      expect(Buffer.from(lock.token, 'base64url').length).toBeGreaterThanOrEqual(16);
      expect(await suite.client.get('test:{order:1}')).toBe(lock.token);
      const pttl = await suite.client.pttl('test:{order:1}');
      expect(pttl).toBeGreaterThan(4_000);
      expect(pttl).toBeLessThanOrEqual(5_000);
      expect(lock.isHeld()).toBe(true);
      expect(await locks.isLocked('order:1')).toBe(true);
      expect(await lock.release()).toBe(true);
      expect(lock.signal.aborted).toBe(true);
      expect(await suite.client.exists('test:{order:1}')).toBe(0);
      expect(await lock.release()).toBe(false);
      expect(await locks.isLocked('order:1')).toBe(false);
    });

    it("release of an expired lock returns false, counts it and never deletes the next holder's lock", async () => {
      const locks = await suite.pool.make({ ttl: 100, watchdog: false });
      const first = await locks.acquire('order:2');
      await sleep(150);
      expect(first.isHeld()).toBe(false);
      const second = await locks.acquire('order:2', { ttl: 5_000 });
      expect(await first.release()).toBe(false);
      expect(await suite.client.get('test:{order:2}')).toBe(second.token);
      expect(locks.getStats().releaseFailures).toBe(1);
      expect(await second.release()).toBe(true);
    });

    it('release() after a loss already reported names that loss, not a guessed cause such as a short ttl', async () => {
      const locks = await suite.pool.make({ ttl: 5_000 });
      const lock = await locks.acquire('order:taken');
      const warnings = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      try {
        // Redis lost the key and another owner took it (a restart, a failover): the next extend finds out.
        await suite.client.set('test:{order:taken}', 'another owner', 'PX', 5_000);
        await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
        expect(await lock.release()).toBe(false);
        const logged = warnings.mock.calls.map(([m]) => String(m));
        expect(logged.filter((m) => m.includes('release() of lock "order:taken"'))).toEqual([
          'release() of lock "order:taken": the lock had been lost before the call (not-owner, reported then); nothing was deleted.',
        ]);
        // Before: "The guarded work outlived its lease: raise ttl or keep the watchdog on", for a loss that was neither.
        expect(logged.filter((m) => /outlived its lease|raise ttl/.test(m))).toEqual([]);
        expect(locks.getStats()).toMatchObject({ lost: 1, releaseFailures: 1 });
        expect(await suite.client.get('test:{order:taken}')).toBe('another owner');
      } finally {
        warnings.mockRestore();
        await suite.client.del('test:{order:taken}');
      }
    });

    it('sends no release after a failed acquire: a busy attempt is exactly one script call', async () => {
      const holder = await suite.pool.make();
      const other = await suite.pool.make();
      const lock = await holder.acquire('order:3');
      // ioredis sends EVAL the first time a connection uses a script, EVALSHA afterwards: count both.
      const scriptCalls = async () => (await commandCalls(suite.client, 'eval')) + (await commandCalls(suite.client, 'evalsha'));
      const before = await scriptCalls();
      await expect(other.acquire('order:3', { onBusy: 'throw' })).rejects.toBeInstanceOf(LockBusyError);
      await sleep(50);
      expect((await scriptCalls()) - before).toBe(1);
      await lock.release();
    });

    it('extend() sets a new lease owner-checked, and fails with LockLostError once the lease is gone', async () => {
      const locks = await suite.pool.make({ ttl: 1_000, watchdog: false });
      const lock = await locks.acquire('order:4');
      await lock.extend(10_000);
      expect(await suite.client.pttl('test:{order:4}')).toBeGreaterThan(9_000);
      await suite.client.set('test:{order:4}', 'someone-else');
      await expect(lock.extend()).rejects.toBeInstanceOf(LockLostError);
      expect(lock.signal.aborted).toBe(true);
      expect(lock.signal.reason).toBeInstanceOf(LockLostError);
      expect(await lock.release()).toBe(false);
      expect(await suite.client.get('test:{order:4}')).toBe('someone-else');
    });

    it('Symbol.asyncDispose releases', async () => {
      const locks = await suite.pool.make();
      {
        await using held = await locks.acquire('order:5');
        expect(await locks.isLocked('order:5')).toBe(true);
        expect(held.isHeld()).toBe(true);
      }
      expect(await locks.isLocked('order:5')).toBe(false);
    });

    it('await using: a release Redis does not answer is logged, not thrown after the finished block (as withLock)', async () => {
      const own = await RedisProcess.start();
      const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
      const locks = new LockService({ redis: own.url, commandTimeout: 200 });
      try {
        await locks.onModuleInit();
        let done = false;
        const block = async () => {
          await using held = await locks.acquire('order:6', { watchdog: false });
          expect(held.isHeld()).toBe(true);
          own.pause(); // the fault: Redis frozen when the block ends
          done = true;
        };
        await expect(block()).resolves.toBeUndefined(); // before: rejected with LockConnectionError after the work was done
        expect(done).toBe(true);
        expect(warn.mock.calls.map((call) => String(call[0])).join('\n')).toMatch(
          /Release of "order:6" at the end of its await using block failed; its lease will lapse by TTL: .*did not answer release within 200 ms/,
        );
        // An explicit release() still says so.
        own.resume();
        const other = await locks.acquire('order:7', { watchdog: false });
        own.pause();
        await expect(other.release()).rejects.toBeInstanceOf(LockConnectionError);
      } finally {
        warn.mockRestore();
        own.resume();
        await locks.close();
        await own.stop();
      }
    });
  });

  describe('script cache', () => {
    it('sends each script in full on its first use, so no call takes the NOSCRIPT detour (which would reorder it)', async () => {
      const own = await RedisProcess.start();
      const a = new LockService({ redis: own.url, ttl: 300 });
      const b = new LockService({ redis: own.url, ttl: 300 });
      try {
        await Promise.all([a.onModuleInit(), b.onModuleInit()]);
        const held = await a.acquire('order:1'); // acquire
        await expect(b.acquire('order:1', { waitTimeout: 50 })).rejects.toBeInstanceOf(LockTimeoutError); // join, then abandon
        const waiter = b.acquire('order:1', { waitTimeout: 5_000 });
        await sleep(450); // watchdog renewals (pipelined) at ttl/3
        await held.release(); // release hands over
        await (await waiter).release();
        expect(a.getStats().renewals).toBeGreaterThan(0);
        const errors = await own.client().info('errorstats');
        expect(errors).not.toMatch(/NOSCRIPT/);
      } finally {
        await Promise.all([a.close(), b.close()]);
        await own.stop();
      }
    });

    it('survives a server that forgot our scripts (SCRIPT FLUSH, as after a restart or failover): acquire, renewals, release', async () => {
      const locks = await suite.pool.make({ ttl: 600 });
      const first = await locks.acquire('flush:1');
      await first.release();
      await suite.client.script('FLUSH');
      const lock = await locks.acquire('flush:1'); // EVALSHA → NOSCRIPT → EVAL
      await suite.client.script('FLUSH');
      const renewalsBefore = locks.getStats().renewals;
      await sleep(700); // past the ttl: only watchdog renewals (pipelined EVALSHA → NOSCRIPT → reload) keep it
      expect(locks.getStats().renewals).toBeGreaterThan(renewalsBefore);
      expect(locks.getStats().renewalErrors).toBe(0);
      expect(lock.isHeld()).toBe(true);
      expect(await suite.client.get('test:{flush:1}')).toBe(lock.token);
      await suite.client.script('FLUSH');
      expect(await lock.release()).toBe(true);
      expect(await suite.client.exists('test:{flush:1}')).toBe(0);
    });
  });

  describe('validity is counted from the start of the successful attempt', () => {
    // DEBUG SLEEP needs a server we started (--enable-debug-command); an external REDIS_URL may refuse it.
    const ownServer = () => !process.env.REDIS_URL;
    (ownServer() ? it : it.skip)(
      'an acquire answered after its lease ran out is reported as a connection problem, never as success, and given back at once',
      async () => {
        // Long enough that "given back" (a delete right after the refusal) and "left to lapse" (TTL later)
        // stay apart by more than a loaded machine's stall (100-300 ms; the poll had 200 ms with TTL 600).
        const TTL = 1_500;
        const locks = await suite.pool.make({ ttl: TTL, commandTimeout: 4_000 });
        const fenceBefore = Number((await suite.client.get('test:{slow:1}:f')) ?? '0');
        const sleeper = suite.redis.client();
        await sleeper.ping(); // connected: the DEBUG SLEEP goes out at once and reaches Redis before our acquire
        void sleeper.call('DEBUG', 'SLEEP', '1.8').catch(() => undefined);
        await sleep(20);
        const error = await locks.acquire('slow:1').catch((e) => e);
        const rejectedAt = performance.now();
        expect(error).toBeInstanceOf(LockConnectionError);
        expect(error.message).toMatch(/beyond its 1500 ms lease/);
        // The attempt did take the key once Redis woke (the fence moved), with a fresh PX 1500 by Redis'
        // clock: left alone, the key would stay about TTL longer. Given back means gone well before that.
        expect(Number(await suite.client.get('test:{slow:1}:f'))).toBeGreaterThan(fenceBefore);
        expect(await pollUntil(async () => (await suite.client.exists('test:{slow:1}')) === 0, TTL / 3, 2)).toBe(true);
        expect(performance.now() - rejectedAt).toBeLessThan(TTL / 2);
      },
    );
  });

  describe('timeouts', () => {
    it('a reply that arrived while this process was blocked is not reported as a timeout', async () => {
      const locks = await suite.pool.make({ commandTimeout: 100, ttl: 5_000 });
      const pending = locks.acquire('blocked:1');
      const until = performance.now() + 300; // the event loop is blocked past commandTimeout; Redis answers meanwhile
      while (performance.now() < until);
      const lock = await pending;
      expect(lock.isHeld()).toBe(true);
      expect(await lock.release()).toBe(true);
    });

    it('many waiters in one process do not trip the MaxListeners warning', async () => {
      const warnings: Error[] = [];
      const onWarning = (w: Error) => warnings.push(w);
      process.on('warning', onWarning);
      const locks = await suite.pool.make();
      const lock = await locks.acquire('crowd:1');
      const waiters = Array.from({ length: 30 }, () => locks.withLock('crowd:1', () => undefined, { waitTimeout: 5_000 }));
      await sleep(50);
      await lock.release();
      await Promise.all(waiters);
      await sleep(10);
      process.off('warning', onWarning);
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
    });
  });

  describe('validation happens before any Redis command', () => {
    // Pointed at a port nobody listens on: a Redis call would surface as LockConnectionError.
    const offline = () => new LockService({ redis: 'redis://127.0.0.1:1', commandTimeout: 200, retryDelay: { min: 1, max: 2 } });
    let locks: LockService;
    beforeEach(() => (locks = offline()));
    afterEach(() => locks.close());

    it.each([
      ['ttl', { ttl: 0 }],
      ['ttl', { ttl: 1.5 }],
      ['ttl', { ttl: 2_147_483_648 }],
      ['ttl', { ttl: '100' }],
      ['waitTimeout', { waitTimeout: -1 }],
      ['onBusy', { onBusy: 'wait' }],
      ['watchdog', { watchdog: 'yes' }],
      ['maxHold', { maxHold: NaN }],
      ['minHold', { minHold: -1 }],
      ['retryDelay.max', { retryDelay: { min: 50, max: 10 } }],
      ['retryDelay', { retryDelay: 5 }],
      ['retryDelay', { retryDelay: 'x' }],
      ['onLockLost', { onLockLost: 'log' }],
      // null is not "not given": it was read as the default
      ['ttl', { ttl: null }],
      ['waitTimeout', { waitTimeout: null }],
      // a release would keep the key longer than any holder may hold it
      ['minHold', { maxHold: 1_000, minHold: 120_000 }],
    ])('rejects a bad %s with LockOptionsError naming it', async (name, options) => {
      const error = await locks.acquire('k', options as never).catch((e) => e);
      expect(error).toBeInstanceOf(LockOptionsError);
      expect(error.option).toBe(`options.${name}`);
      expect(error.message).toContain(name);
    });

    it.each([
      ['an empty string', ''],
      ['a number', 42],
      ['undefined', undefined],
      ['null', null],
      ['an empty array', []],
      ['an array with a non-string', ['a', {}]],
      ['an over-long key', 'k'.repeat(1_025)],
    ])('rejects %s as a key with LockKeyError', async (_, key) => {
      await expect(locks.acquire(key as never)).rejects.toBeInstanceOf(LockKeyError);
      await expect(locks.withLock(key as never, () => 1)).rejects.toBeInstanceOf(LockKeyError);
    });

    it('withLock without a function to run: DistributedLockError naming what it got, and the argument order when the two are swapped', async () => {
      const error = await locks.withLock('k', 'run' as never).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DistributedLockError);
      expect((error as Error).message).toBe('withLock(key, fn, options?): fn must be the function to run under the lock, got the string "run".');
      await expect(locks.withLock('k', { ttl: 5_000 } as never, (() => 1) as never)).rejects.toThrow(
        /got an object \(Object\)\. The options come after the callback: withLock\(key, fn, options\)\./,
      );
    });

    it('rejects options that are not an object (an array, a string, a Promise) in acquire and tryAcquire alike', async () => {
      for (const options of [[], 'abc', 5, null]) {
        await expect(locks.acquire('k', options as never)).rejects.toBeInstanceOf(LockOptionsError);
        await expect(locks.tryAcquire('k', options as never)).rejects.toBeInstanceOf(LockOptionsError);
      }
      // Options from an async function, not awaited: they were read as "no options", the defaults applying unseen.
      const pending = Promise.resolve({ ttl: 100, onBusy: 'fail-fast' });
      const awaitThem = /expected an options object, got an object \(Promise\): await the options before passing them\./;
      await expect(locks.acquire('k', pending as never)).rejects.toThrow(awaitThem);
      await expect(locks.tryAcquire('k', pending as never)).rejects.toThrow(awaitThem);
      await expect(locks.withLock('k', () => 1, pending as never)).rejects.toThrow(awaitThem);
      await expect(locks.acquire('k', { retryDelay: pending } as never)).rejects.toThrow(awaitThem);
    });

    it('rejects a Map or a Date as options (read as "no options" before: every default applied unseen); a class instance reads like a plain object', async () => {
      const map = new Map<string, unknown>([['onBusy', 'fail-fast']]);
      const fromEntries =
        /expected an options object, got an object \(Map\): options are read from properties, which a Map's entries are not; pass Object\.fromEntries\(map\)\./;
      await expect(locks.acquire('k', map as never)).rejects.toThrow(fromEntries);
      await expect(locks.tryAcquire('k', map as never)).rejects.toThrow(fromEntries);
      await expect(locks.withLock('k', () => 1, map as never)).rejects.toThrow(fromEntries);
      await expect(locks.acquire('k', { retryDelay: new Map() } as never)).rejects.toThrow(/"retryDelay"|retryDelay/);
      await expect(locks.acquire('k', new Date() as never)).rejects.toThrow(
        /got an object \(Date\): every option would read as not given; pass a plain object\./,
      );
      expect(() => new LockService(new Map([['redis', 'redis://127.0.0.1:6379']]) as never)).toThrow(fromEntries);
      // Its fields are read: a bad one is named, a good one passes validation (and meets the absent Redis).
      class CallOptions {
        constructor(readonly ttl: number) {}
      }
      await expect(locks.acquire('k', new CallOptions(0))).rejects.toThrow(
        /Invalid option "options\.ttl": expected an integer number of milliseconds/,
      );
      await expect(locks.acquire('k', new CallOptions(5_000))).rejects.toBeInstanceOf(LockConnectionError);
    });

    it.each([
      ['a number', 123, /expected a redis:\/\/ URL/],
      ['true', true, /expected a redis:\/\/ URL/],
      ['an array of URLs', ['redis://127.0.0.1:6379'], /expected a redis:\/\/ URL/],
      ['options naming no server', {}, /names no server/],
      ['an http URL', 'http://127.0.0.1:6379', /scheme "http:"/],
      ['a port alone (localhost on every instance)', '6379', /names only a port/],
      ['Sentinels that are not a list', { sentinels: 'x', name: 'm' }, /non-empty array/],
      ['Sentinels without the primary name', { sentinels: [{ host: '127.0.0.1', port: 26379 }] }, /name of the primary/],
      // Below: each failed only when connecting, after startupTimeout ("not reachable"), or went to localhost.
      [
        'a port that is not a number (a missing setting)',
        { host: '10.0.0.1', port: 'abc' },
        /"redis\.port": expected a TCP port, an integer from 1 to 65535, got the string "abc"/,
      ],
      ['a port out of range', { host: '10.0.0.1', port: 70_000 }, /"redis\.port": expected a TCP port.*got the number 70000/],
      ['a fractional port', { host: '10.0.0.1', port: 6379.5 }, /"redis\.port".*got the number 6379\.5/],
      ['port 0 in a URL', 'redis://10.0.0.1:0', /expected a TCP port from 1 to 65535 in the string "redis:\/\/10\.0\.0\.1:0", got 0/],
      [
        'an empty host (localhost on every instance)',
        { host: '', port: 6379 },
        /"redis\.host": expected the server's host name.*connect to localhost/,
      ],
      [
        'a port without a host (localhost on every instance)',
        { port: 6379 },
        /names only a port \(6379\): ioredis would connect to localhost on every instance/,
      ],
      [
        'a Sentinel with a bad port',
        { sentinels: [{ host: '10.0.0.1', port: NaN }], name: 'm' },
        /"redis\.sentinels\[0\]\.port": expected a TCP port.*got NaN/,
      ],
    ])('refuses a redis option that is %s before connecting (ioredis would use localhost:6379, or throw a TypeError)', (_, redis, message) => {
      const make = () => new LockService({ redis: redis as never });
      expect(make).toThrow(LockOptionsError);
      expect(make).toThrow(message);
    });

    it('takes a port given as a string of digits (an environment variable), as ioredis does', () => {
      const service = new LockService({ redis: { host: '10.0.0.1', port: '6379' as never }, requireRedisAtStartup: false });
      return service.close();
    });

    it('takes the URL forms ioredis takes: host:port without a scheme, //host:port', async () => {
      const { port } = new URL(suite.redis.url);
      for (const redis of [`127.0.0.1:${port}`, `//127.0.0.1:${port}`]) {
        const service = new LockService({ redis });
        try {
          await service.onModuleInit();
          const lock = await service.acquire('url-forms');
          expect(await lock.release()).toBe(true);
        } finally {
          await service.close();
        }
      }
    });

    it('refuses an option it does not read (a typo would leave the default in force unseen), naming the closest', async () => {
      expect(() => new LockService({ redis: suite.redis.url, waitTimout: 10 } as never)).toThrow(
        /waitTimout": is not an option; did you mean waitTimeout\?/,
      );
      expect(() => resolveDeferOptions({ queueNme: 'q' } as never)).toThrow(/defer\.queueNme": is not an option; did you mean queueName\?/);
      await expect(locks.acquire('k', { ttll: 50 } as never)).rejects.toThrow(/options\.ttll": is not an option; did you mean ttl\?/);
      await expect(locks.acquire('k', { retryDelay: { minimum: 5 } } as never)).rejects.toThrow(/retryDelay\.minimum": is not an option/);
      await expect(locks.tryAcquire('k', { TTL: 50 } as never)).rejects.toThrow(/did you mean ttl\?/);
    });

    it("refuses onBusy 'defer' outside @Locked, saying where it belongs", async () => {
      expect(() => new LockService({ redis: suite.redis.url, onBusy: 'defer' as never })).toThrow(/'defer' is set per @Locked method/);
      await expect(locks.acquire('k', { onBusy: 'defer' as never })).rejects.toThrow(/'defer' is set per @Locked method/);
    });

    it('a service closed before it started, or while it starts, does not wait out startupTimeout', async () => {
      const closed = new LockService({ redis: suite.redis.url });
      await closed.close();
      let started = performance.now();
      await expect(closed.onModuleInit()).rejects.toThrow(/closed before it started/);
      // At once, not after startupTimeout (10 s); 2 s allows a loaded machine (was 500 ms).
      expect(performance.now() - started).toBeLessThan(2_000);

      const unreachable = new LockService({ redis: 'redis://127.0.0.1:1', startupTimeout: 10_000 });
      started = performance.now();
      const starting = unreachable.onModuleInit().catch((e: Error) => e);
      setTimeout(() => void unreachable.close(), 100);
      expect(((await starting) as Error).message).toMatch(/close\(\) was called while the LockService was starting/);
      expect(performance.now() - started).toBeLessThan(2_000);
    });

    it('rejects bad module options when the service is made', () => {
      expect(() => new LockService({ redis: '' })).toThrow(LockOptionsError);
      expect(() => new LockService({ redis: suite.redis.url, ttl: -5 })).toThrow(/DistributedLockModule\.ttl/);
      expect(() => new LockService({ redis: suite.redis.url, commandTimeout: 0 })).toThrow(/commandTimeout/);
    });

    it('takes special characters literally', async () => {
      const online = await suite.pool.make();
      for (const key of ['*', 'a?b', '[x]', '{tag}', 'line\r\nbreak', 'ключ', '🔒']) {
        const lock = await online.acquire(key);
        expect(await online.isLocked(key)).toBe(true);
        expect(await online.isLocked(key + 'x')).toBe(false);
        await lock.release();
      }
    });
  });
});
