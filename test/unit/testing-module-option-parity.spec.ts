/**
 * The testing module refuses what DistributedLockModule refuses at startup, with the same error: a test
 * must not pass with options that fail in production. `redis` and `nodes` name nothing in memory, but
 * must still be shapes production takes. Each case boots both modules side by side; production never
 * reaches a server (every refusal comes before a connection; the client given is lazy and never used).
 */
import 'reflect-metadata';
import { DynamicModule, Injectable, Module, Provider } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis, { Cluster } from 'ioredis';
import { Deferred, DistributedLockError, DistributedLockModule, DistributedLockModuleOptions, Locked, LockOptionsError } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';

const three = ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379', 'redis://10.0.0.3:6379'];

/** The error a module's startup throws (forRoot, compile or init), or 'started'. */
async function startupError(makeModule: () => DynamicModule, providers: Provider[] = []): Promise<unknown> {
  let moduleRef;
  try {
    const lockModule = makeModule();
    @Module({ imports: [lockModule], providers })
    class AppModule {}
    moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    await moduleRef.init();
  } catch (error) {
    return error;
  }
  await moduleRef.close();
  return 'started';
}

describe('the testing module refuses the options production refuses, with the same error', () => {
  // Production needs a redis option to get as far as the option under test; this client never connects.
  const lazy = new Redis({ port: 1, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  afterAll(() => lazy.disconnect());

  it.each<[string, Record<string, unknown>]>([
    ['redis: a number', { redis: 42 }],
    ['redis: {} (names no server: localhost on every instance)', { redis: {} }],
    ['redis: a port alone', { redis: '6379' }],
    ['redis: a URL of another scheme', { redis: 'http://10.0.0.1' }],
    ['redis: Sentinels without a name', { redis: { sentinels: [{ host: '10.0.0.1', port: 26379 }] } }],
    ['redis: null', { redis: null }],
    ['nodes: two', { nodes: three.slice(0, 2) }],
    ['nodes: one server twice', { nodes: [three[0], three[1], '10.0.0.1:6379'] }],
    ['nodes and redis both', { nodes: three, redis: three[0] }],
    ['nodes with nodeRecoveryDelay below the ttl', { nodes: three, ttl: 10_000, nodeRecoveryDelay: 5_000 }],
    ['nodes with replicaAcks', { nodes: three, replicaAcks: 1 }],
    ['isGlobal: not a boolean', { isGlobal: 'yes' }],
    ["defer: 'yes'", { defer: 'yes' }],
    ["defer: { queueName: 'has space' }", { defer: { queueName: 'has space' } }],
    ['defer: { attempts: -1 }', { defer: { attempts: -1 } }],
    ['defer: { nosuchkey: 1 }', { defer: { nosuchkey: 1 } }],
    ['defer: { jobLease: 5 }', { defer: { jobLease: 5 } }],
    ['defer with nodes', { nodes: three, defer: {} }],
  ])('%s', async (_case, options) => {
    const withRedis = ('nodes' in options ? options : { redis: lazy, ...options }) as DistributedLockModuleOptions;
    const production = await startupError(() => DistributedLockModule.forRoot(withRedis));
    expect(production).toBeInstanceOf(LockOptionsError);
    const testing = await startupError(() => DistributedLockTestingModule.forRoot(options));
    expect(testing).toBeInstanceOf(LockOptionsError);
    expect((testing as Error).message).toBe((production as Error).message);
  });

  it('defer with a Redis Cluster client is refused by both (BullMQ needs one Redis)', async () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    try {
      const options = { redis: cluster, defer: {}, requireRedisAtStartup: false, commandTimeout: 100, shutdownTimeout: 100 };
      const production = await startupError(() => DistributedLockModule.forRoot(options));
      const testing = await startupError(() => DistributedLockTestingModule.forRoot(options));
      expect(production).toBeInstanceOf(DistributedLockError);
      expect((production as Error).message).toMatch(/does not support a Redis Cluster client/);
      expect((testing as Error).message).toBe((production as Error).message);
    } finally {
      cluster.disconnect();
    }
  });

  it('forRoot(url) is refused by both, each naming its own forRoot', async () => {
    const production = await startupError(() => DistributedLockModule.forRoot('redis://10.0.0.1' as never));
    const testing = await startupError(() => DistributedLockTestingModule.forRoot('redis://10.0.0.1' as never));
    expect(production).toBeInstanceOf(LockOptionsError);
    expect(testing).toBeInstanceOf(LockOptionsError);
    expect((testing as Error).message).toBe((production as Error).message.replace('DistributedLockModule', 'DistributedLockTestingModule'));
  });

  it("an onBusy 'defer' method without the defer option fails startup in both, each naming its own module", async () => {
    @Injectable()
    class Mailer {
      @Locked('mail:<0>', { onBusy: 'defer' })
      async send(id: string): Promise<string | Deferred> {
        return id;
      }
    }
    const production = await startupError(
      () => DistributedLockModule.forRoot({ redis: lazy, requireRedisAtStartup: false, commandTimeout: 100, shutdownTimeout: 100 }),
      [Mailer],
    );
    const testing = await startupError(() => DistributedLockTestingModule.forRoot({}), [Mailer]);
    expect(production).toBeInstanceOf(DistributedLockError);
    expect((production as Error).message).toMatch(/^Mailer\.send use onBusy 'defer', but DistributedLockModule has no "defer" option/);
    expect((testing as Error).message).toBe((production as Error).message.replace('DistributedLockModule', 'DistributedLockTestingModule'));
  });

  // Before: Nest's "TypeError: optionsFactory[self.factoryClassMethodKey] is not a function" at startup.
  it('forRootAsync with a useClass or useExisting factory without create() is refused by both, naming the option', async () => {
    class LockOptionsFactory {
      // Named as other modules name theirs (createTypeOrmOptions): Nest calls create().
      createLockOptions() {
        return { redis: lazy };
      }
    }
    @Module({ providers: [LockOptionsFactory], exports: [LockOptionsFactory] })
    class FactoryModule {}
    for (const [key, options] of [
      ['useClass', { useClass: LockOptionsFactory as never }],
      ['useExisting', { imports: [FactoryModule], useExisting: LockOptionsFactory as never }],
    ] as Array<['useClass' | 'useExisting', Parameters<typeof DistributedLockModule.forRootAsync>[0]]>) {
      const production = await startupError(() => DistributedLockModule.forRootAsync(options));
      const testing = await startupError(() => DistributedLockTestingModule.forRootAsync(options));
      expect(production).toBeInstanceOf(LockOptionsError);
      expect((production as Error).message).toBe(
        `Invalid option "DistributedLockModule.forRootAsync(options).${key}": expected a provider with a create() method returning the ` +
          "module's options (Nest calls it), got an object (LockOptionsFactory) without one. Name the method create(), or use " +
          'forRootAsync({ imports: [ConfigModule], inject: [ConfigService], useFactory: (config) => ({ redis: config.get("REDIS_URL") }) }).',
      );
      expect(testing).toBeInstanceOf(LockOptionsError);
      expect((testing as Error).message).toBe((production as Error).message.replace('DistributedLockModule', 'DistributedLockTestingModule'));
    }
    // create() as a class field is a method too; what it returns (or resolves to) is the options.
    class FieldFactory {
      create = async () => ({ redis: 'redis://nowhere:1' });
    }
    expect(await startupError(() => DistributedLockTestingModule.forRootAsync({ useClass: FieldFactory }))).toBe('started');
  });

  it('still takes what production takes, redis or nodes, without connecting to them', async () => {
    expect(await startupError(() => DistributedLockTestingModule.forRoot({ redis: 'redis://nowhere:1' }))).toBe('started');
    expect(await startupError(() => DistributedLockTestingModule.forRoot({ redis: '10.0.0.1:6379' }))).toBe('started');
    expect(await startupError(() => DistributedLockTestingModule.forRoot({ redis: lazy }))).toBe('started');
    expect(await startupError(() => DistributedLockTestingModule.forRoot({ nodes: three, nodeRecoveryDelay: 0 }))).toBe('started');
    expect(await startupError(() => DistributedLockTestingModule.forRoot({}))).toBe('started');
    expect(lazy.status).toBe('wait');
  });

  // Per call, not only at startup: a review found a @Locked ttl, a minHold and an extend() longer than
  // nodeRecoveryDelay passing every test on the testing module, while production's RedlockStore refuses all three.
  it('with nodes, refuses per call a ttl, minHold or extend() longer than nodeRecoveryDelay, as Redlock does', async () => {
    const testing = new LockTestingController();
    const locks = testing.createService({ nodes: three, ttl: 5_000 }); // nodeRecoveryDelay defaults to the ttl
    try {
      await expect(locks.acquire('lease', { ttl: 60_000 })).rejects.toThrow(
        /Invalid option "ttl": 60000 ms is longer than nodeRecoveryDelay \(5000 ms\)/,
      );
      await expect(locks.withLock('lease', () => 'ran', { minHold: 20_000 })).rejects.toThrow(
        /Invalid option "minHold": 20000 ms is longer than nodeRecoveryDelay/,
      );
      const lock = await locks.acquire('lease');
      await expect(lock.extend(60_000)).rejects.toThrow(/Invalid option "extend ttl": 60000 ms is longer than nodeRecoveryDelay/);
      await lock.release();
      // Without nodes nothing limits a lease, as on a single Redis.
      const single = testing.createService({ ttl: 5_000 });
      await (await single.acquire('lease', { ttl: 60_000 })).release();
      await single.close();
    } finally {
      await locks.close();
    }
  });
});
