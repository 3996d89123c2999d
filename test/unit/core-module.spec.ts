import 'reflect-metadata';
import { DynamicModule, Injectable, Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import type { RedisLockStore } from '../../lib/redis/redis-lock-store';
import { DistributedLockModule, DistributedLockModuleOptions, LockLostError, LockOptionsError, LockService, LockServiceClosedError } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';
import { RedisProcess, SharedRedis } from '../harness/redis-process';

@Injectable()
class Consumer {
  constructor(readonly locks: LockService) {}
}

@Module({ providers: [Consumer], exports: [Consumer] })
class FeatureModule {}

describe('DistributedLockModule', () => {
  let redis: SharedRedis;
  beforeAll(async () => (redis = await RedisProcess.shared()));
  afterAll(() => redis.stop());

  it('forRoot provides LockService globally, so a feature module injects it without importing anything', async () => {
    const app = await Test.createTestingModule({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, ttl: 10_000 }), FeatureModule],
    }).compile();
    await app.init();
    const consumer = app.get(Consumer);
    const lock = await consumer.locks.acquire('module:1');
    expect(lock.isHeld()).toBe(true);
    await lock.release();
    await app.close();
  });

  it('forRootAsync takes its options from ConfigService', async () => {
    const app = await Test.createTestingModule({
      imports: [
        ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => ({ REDIS_URL: redis.url, LOCK_TTL: '7000' })] }),
        DistributedLockModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({
            redis: config.getOrThrow<string>('REDIS_URL'),
            ttl: Number(config.getOrThrow('LOCK_TTL')),
            keyPrefix: 'cfg:',
          }),
        }),
      ],
    }).compile();
    await app.init();
    const probe = redis.client();
    const lock = await app.get(LockService).acquire('module:2');
    expect(await probe.pttl('cfg:{module:2}')).toBeGreaterThan(6_000);
    await lock.release();
    await app.close();
  });

  it('forRoot refuses what is not an options object (no options, a URL string) and a non-boolean isGlobal, saying what to pass', () => {
    expect(() => DistributedLockModule.forRoot(undefined as never)).toThrow(LockOptionsError);
    expect(() => DistributedLockModule.forRoot('redis://127.0.0.1:6379' as never)).toThrow(/forRoot\(\{ redis: "redis:\/\/127\.0\.0\.1:6379" \}\)/);
    expect(() => DistributedLockModule.forRoot({ redis: 'redis://127.0.0.1:6379', isGlobal: 'no' as never })).toThrow(/isGlobal.*expected a boolean/);
    expect(DistributedLockModule.forRoot({ redis: 'redis://127.0.0.1:6379', isGlobal: false }).global).toBe(false);
  });

  it('forRootAsync refuses what Nest would fail on without saying what to pass, and a non-boolean isGlobal', () => {
    const where = /DistributedLockModule\.forRootAsync\(options\)/;
    expect(() => DistributedLockModule.forRootAsync(undefined as never)).toThrow(LockOptionsError);
    // Before: Nest's UndefinedDependencyException for DISTRIBUTED_LOCK_MODULE_OPTIONS at compile().
    expect(() => DistributedLockModule.forRootAsync({})).toThrow(
      /exactly one of useFactory, useClass or useExisting, got none: e\.g\. forRootAsync\(\{ imports/,
    );
    expect(() => DistributedLockModule.forRootAsync({})).toThrow(where);
    expect(() => DistributedLockModule.forRootAsync({ useFactroy: () => ({}) } as never)).toThrow(/useFactroy.*did you mean useFactory/);
    expect(() => DistributedLockModule.forRootAsync({ useFactory: { redis: 'redis://x' } } as never)).toThrow(/useFactory.*expected a function/);
    expect(() => DistributedLockModule.forRootAsync({ useFactory: () => ({}), useExisting: 'X' as never })).toThrow(/got useFactory and useExisting/);
    expect(() => DistributedLockModule.forRootAsync({ useFactory: () => ({}), inject: 'ConfigService' as never })).toThrow(
      /inject.*expected an array/,
    );
    // Before: taken, and the module made global.
    expect(() => DistributedLockModule.forRootAsync({ useFactory: () => ({}), isGlobal: 'yes' as never })).toThrow(/isGlobal.*expected a boolean/);
    expect(DistributedLockModule.forRootAsync({ useFactory: () => ({}), isGlobal: false }).global).toBe(false);
    // Nest reads a null provider as not given: a useClass beside `useFactory: null` is the one provider.
    class LockOptionsFactory {
      create() {
        return { redis: 'redis://127.0.0.1:6379' };
      }
    }
    expect(() => DistributedLockModule.forRootAsync({ useFactory: null as never, useClass: LockOptionsFactory })).not.toThrow();
    // The testing module stands in for it, so it refuses the same.
    expect(() => DistributedLockTestingModule.forRootAsync({})).toThrow(/DistributedLockTestingModule\.forRootAsync\(options\)".*got none/);
  });

  it('forRootAsync refuses isGlobal in the options its factory returns, at startup: forRootAsync decides it before the factory runs', async () => {
    /** compile()'s error, or undefined when the module compiled (then closed). */
    const compileError = async (lockModule: DynamicModule): Promise<unknown> => {
      try {
        const app = await Test.createTestingModule({ imports: [lockModule] }).compile();
        await app.close();
        return undefined;
      } catch (error) {
        return error;
      }
    };
    // Before: compiled, and the module stayed global although the factory said isGlobal: false.
    const refused = await compileError(
      DistributedLockModule.forRootAsync({ useFactory: () => ({ redis: redis.url, isGlobal: false }) as DistributedLockModuleOptions }),
    );
    expect(refused).toBeInstanceOf(LockOptionsError);
    expect((refused as Error).message).toBe(
      'Invalid option "isGlobal": The useFactory of DistributedLockModule.forRootAsync(options) returned isGlobal: false among the ' +
        "module's options, where nothing reads it: whether the module is global is decided by forRootAsync itself, before the factory " +
        'runs, so this module is global (the default: forRootAsync was given no isGlobal). Put isGlobal next to useFactory: ' +
        'DistributedLockModule.forRootAsync({ isGlobal, useFactory, ... }), and leave it out of the options.',
    );
    // An async factory, a useClass's create(), and the testing module, alike.
    const options = { redis: redis.url, isGlobal: true } as DistributedLockModuleOptions;
    expect(await compileError(DistributedLockModule.forRootAsync({ isGlobal: false, useFactory: () => Promise.resolve(options) }))).toHaveProperty(
      'message',
      expect.stringMatching(/returned isGlobal: true .* so this module is not global \(forRootAsync's isGlobal: false\)/),
    );
    class LockOptionsFactory {
      create() {
        return options;
      }
    }
    expect(await compileError(DistributedLockModule.forRootAsync({ useClass: LockOptionsFactory }))).toHaveProperty(
      'message',
      expect.stringMatching(
        /The create\(\) of the useClass of DistributedLockModule\.forRootAsync\(options\) returned isGlobal: true.*next to useClass/,
      ),
    );
    expect(await compileError(DistributedLockTestingModule.forRootAsync({ useFactory: () => options }))).toBeInstanceOf(LockOptionsError);
    // Next to useFactory it decides, and the options the factory returns are taken as before.
    const scoped = DistributedLockModule.forRootAsync({ isGlobal: false, useFactory: () => ({ redis: redis.url }) });
    expect(scoped.global).toBe(false);
    expect(await compileError(scoped)).toBeUndefined();
  });

  it('isGlobal is refused by a LockService made by hand, which belongs to no module; forRoot and forRootAsync still take it', async () => {
    const refusal =
      'Invalid option "isGlobal": is an option of DistributedLockModule.forRoot and forRootAsync: it decides whether the module ' +
      'Nest builds is global (true, the default) or serves only the modules that import it (false). A LockService made by hand ' +
      "(new LockService(options), or the testing module's createService(options)) belongs to no module, so nothing would read it: " +
      'leave isGlobal out, or import DistributedLockModule.forRoot({ isGlobal, redis, … }) and inject the LockService it provides.';
    // Before: accepted without a word (a known key), and it did nothing. Refused before any connection is made.
    for (const isGlobal of [true, false]) {
      const build = () => new LockService({ redis: redis.url, isGlobal } as DistributedLockModuleOptions);
      expect(build).toThrow(LockOptionsError);
      expect(build).toThrow(refusal);
    }
    expect(() => new LockTestingController().createService({ isGlobal: true } as DistributedLockModuleOptions)).toThrow(refusal);

    // Nest takes it out of the options it gives the LockService: forRoot and forRootAsync start, global, and lock.
    for (const lockModule of [
      DistributedLockModule.forRoot({ redis: redis.url, isGlobal: true }),
      DistributedLockModule.forRootAsync({ isGlobal: true, useFactory: () => ({ redis: redis.url }) }),
    ]) {
      expect(lockModule.global).toBe(true);
      const app = await Test.createTestingModule({ imports: [lockModule, FeatureModule] }).compile();
      await app.init();
      const lock = await app.get(Consumer).locks.acquire('module:is-global');
      expect(lock.isHeld()).toBe(true);
      await lock.release();
      await app.close();
    }
  });

  it('fails the bootstrap with a named option error', async () => {
    await expect(
      Test.createTestingModule({ imports: [DistributedLockModule.forRoot({ redis: redis.url, waitTimeout: -1 })] }).compile(),
    ).rejects.toThrow(LockOptionsError);
  });

  // Shutdown drains (DESIGN.md invariant 8): it asks the holder to finish through its signal and waits
  // for its release; it no longer deletes the key itself while the holder may still be running.
  it('on shutdown asks holders to finish, waits for their release, stops waiters and closes only its own connection', async () => {
    const mine = new Redis(redis.url);
    try {
      const app = await Test.createTestingModule({ imports: [DistributedLockModule.forRoot({ redis: mine, ttl: 30_000 })] }).compile();
      await app.init();
      const locks = app.get(LockService);
      const held = await locks.acquire('module:3');
      held.signal.addEventListener('abort', () => void held.release());
      const waiting = locks.acquire('module:3', { waitTimeout: 10_000 }).catch((e) => e);
      // A real waiter: queued in Redis behind the held lock.
      for (let i = 0; i < 200 && (await mine.llen('lock:{module:3}:q')) === 0; i++) await new Promise((r) => setTimeout(r, 5));
      expect(await mine.llen('lock:{module:3}:q')).toBe(1);
      app.enableShutdownHooks();
      const started = performance.now();
      await app.close();
      // Stopped by the shutdown: neither a timeout nor a Redis problem, and it says so.
      const stopped = await waiting;
      expect(stopped.constructor).toBe(LockServiceClosedError);
      expect(stopped.message).toBe(
        'LockService is closing or closed; no new locks are taken: lock "module:3" was not acquired (the wait was ended by close()).',
      );
      // Ended by the shutdown, not by its 10 s waitTimeout; 2 s allows a loaded machine (was 500 ms).
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(held.signal.aborted).toBe(true);
      expect((held.signal.reason as LockLostError).reason).toBe('shutdown');
      expect(held.isHeld()).toBe(false);
      expect(mine.status).toBe('ready');
      // Closed is closed, whoever owns the connection (before: a user's client answered; the module's own, LockConnectionError).
      const asked = await locks.isLocked('module:3').catch((e: unknown) => e);
      expect(asked).toBeInstanceOf(LockServiceClosedError);
      expect((asked as Error).message).toBe(
        'LockService is closing or closed; no new locks are taken: lock "module:3" was not looked up (isLocked() came after close() ended).',
      );
      expect(await mine.exists('lock:{module:3}')).toBe(0);
      expect(await mine.llen('lock:{module:3}:q')).toBe(0);
    } finally {
      // Ours, not the module's: closed here even when an expectation failed (it would keep jest alive).
      await mine.quit().catch(() => mine.disconnect());
    }
  });

  it("works through a user's client with an ioredis keyPrefix: every script call (EVAL first, EVALSHA after) names the same prefixed keys", async () => {
    const mine = new Redis(redis.url, { keyPrefix: 'app:' });
    const locks = new LockService({ redis: mine });
    const probe = redis.client();
    try {
      for (let i = 0; i < 3; i++) {
        const lock = await locks.acquire('module:5');
        expect(await probe.get('app:lock:{module:5}')).toBe(lock.token);
        expect(await probe.exists('lock:{module:5}')).toBe(0);
        expect(await lock.release()).toBe(true);
        expect(await probe.exists('app:lock:{module:5}')).toBe(0);
      }
      expect(Number(await probe.get('app:lock:{module:5}:f'))).toBeGreaterThan(0);
    } finally {
      await locks.close();
      await mine.quit();
    }
  });

  it('closes a connection it created (after the holder released)', async () => {
    const locks = new LockService({ redis: redis.url });
    await locks.onModuleInit();
    const lock = await locks.acquire('module:4');
    lock.signal.addEventListener('abort', () => void lock.release());
    await locks.close();
    expect(((locks.engine.store as RedisLockStore).client as Redis).status).toBe('end');
    const probe = redis.client();
    expect(await probe.exists('lock:{module:4}')).toBe(0);
    expect(lock.isHeld()).toBe(false);
  });
});
