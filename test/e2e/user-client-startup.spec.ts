/**
 * A client you pass, or an address you give, that no lock call could go through: refused when the application
 * starts, saying what is wrong with it and what to do, rather than started and then failing every lock call with
 * "check that Redis is reachable" (or waiting out startupTimeout to blame the server). One that becomes so after
 * startup (it subscribes, or its retryStrategy gives up) fails each call saying so.
 */
import { INestApplication, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Redis from 'ioredis';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockConnectionError, LockOptionsError, LockService, Locked } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { closeClient } from '../harness/redis-clients';
import { pollUntil } from '../unit/core-helpers';

const ran: string[] = [];

@Injectable()
class Jobs {
  @Locked('job:<0>', { onBusy: 'defer' })
  async run(id: string): Promise<string | Deferred> {
    ran.push(id);
    return id;
  }
}

describe('a client you pass that cannot serve locks: refused at startup, or told at each call', () => {
  let redis: RedisProcess;
  let probe: Redis;
  beforeAll(async () => {
    redis = await RedisProcess.start();
    probe = redis.client();
  });
  afterAll(() => redis.stop());

  it('a client the user already closed (status end): LockOptionsError at once, not a wait of startupTimeout for "not reachable"', async () => {
    const mine = new Redis({ host: redis.host, port: redis.port });
    await mine.quit();
    const locks = new LockService({ redis: mine, startupTimeout: 3_000 });
    const startedAt = performance.now();
    const error = await locks.onModuleInit().catch((e: unknown) => e);
    expect(performance.now() - startedAt).toBeLessThan(500);
    expect(error).toBeInstanceOf(LockOptionsError);
    expect((error as LockOptionsError).option).toBe('redis');
    expect((error as Error).message).toMatch(/closed \(status "end".*quit\(\) or disconnect\(\).*Pass an open client/s);
  });

  it('a client in subscriber mode: LockOptionsError at startup; one that subscribes later fails each call saying so', async () => {
    const subscribed = new Redis({ host: redis.host, port: redis.port });
    const later = new Redis({ host: redis.host, port: redis.port });
    const refused = new LockService({ redis: subscribed });
    const locks = new LockService({ redis: later, commandTimeout: 500 });
    try {
      await subscribed.subscribe('app-events');
      const error = await refused.onModuleInit().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockOptionsError);
      expect((error as Error).message).toMatch(/subscriber mode \(subscribe\(\) or psubscribe\(\) was called on it\).*duplicate\(\)/s);

      await locks.onModuleInit();
      await later.subscribe('app-events');
      const failure = await locks.acquire('order:1').catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(LockConnectionError);
      expect((failure as Error).message).toMatch(/in subscriber mode \(subscribe\(\) was called on it\)/);
      expect((failure as Error).message).not.toMatch(/reachable/);
    } finally {
      await Promise.all([refused.close(), locks.close()]);
      await Promise.all([closeClient(subscribed), closeClient(later)]);
    }
  });

  it("Sentinel options or a Sentinel client with role 'slave' (a replica: every lock write refused): LockOptionsError naming redis.role", () => {
    const sentinels = [{ host: '127.0.0.1', port: 26379 }];
    const client = new Redis({ sentinels, name: 'mymaster', role: 'slave', lazyConnect: true });
    try {
      for (const option of [{ sentinels, name: 'mymaster', role: 'slave' as const }, client]) {
        let error: unknown;
        try {
          new LockService({ redis: option });
        } catch (e) {
          error = e;
        }
        expect(error).toBeInstanceOf(LockOptionsError);
        expect((error as LockOptionsError).option).toBe('redis.role');
        expect((error as Error).message).toMatch(/replicas, which refuses every write.*Leave role out/s);
      }
    } finally {
      client.disconnect();
    }
  });

  it("a replica's address: startup fails naming its primary, where it started and failed every acquire with READONLY", async () => {
    const replica = await RedisProcess.start({ args: ['--replicaof', redis.host, String(redis.port)] });
    const locks = new LockService({ redis: replica.url });
    try {
      const error = await locks.onModuleInit().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockConnectionError);
      expect((error as Error).message).toContain(
        `Redis at 127.0.0.1:${replica.port} is a replica (INFO replication: role:slave, replicating 127.0.0.1:${redis.port})`,
      );
    } finally {
      await locks.close();
      await replica.stop();
    }
  });

  it('a client whose retryStrategy gives up after Redis went away: each call fails at once saying the client will not reconnect', async () => {
    const own = await RedisProcess.start();
    const mine = new Redis({ host: own.host, port: own.port, retryStrategy: () => null });
    const locks = new LockService({ redis: mine, commandTimeout: 300 });
    try {
      await locks.onModuleInit();
      await own.kill9();
      expect(await pollUntil(() => mine.status === 'end', 2_000)).toBe(true);
      await own.restart();
      const startedAt = performance.now();
      const error = await locks.acquire('order:1').catch((e: unknown) => e);
      expect(performance.now() - startedAt).toBeLessThan(100);
      expect(error).toBeInstanceOf(LockConnectionError);
      expect((error as Error).message).toMatch(
        /gave up reconnecting: its retryStrategy returned no delay\)\. ioredis does not open such a client again/,
      );
    } finally {
      await locks.close();
      await closeClient(mine);
      await own.stop();
    }
  });

  it('defer with a client that has an ioredis keyPrefix: starts (BullMQ refused the connection), the queue keys under that prefix', async () => {
    const mine = new Redis({ host: redis.host, port: redis.port, keyPrefix: 'app:' });
    @Module({ imports: [DistributedLockModule.forRoot({ redis: mine, defer: { queueName: 'prefixed' } })], providers: [Jobs] })
    class App {}
    const app: INestApplication = (await Test.createTestingModule({ imports: [App] }).compile()).createNestApplication();
    try {
      await app.init();
      const locks = app.get(LockService);
      const held = await locks.acquire('job:1');
      expect(await app.get(Jobs).run('1')).toBeInstanceOf(Deferred);
      await held.release();
      expect(await pollUntil(() => ran.includes('1'), 5_000)).toBe(true);
      const keys = await probe.keys('*prefixed*');
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.every((key) => key.startsWith('app:bull:prefixed:'))).toBe(true);
    } finally {
      await app.close();
      await closeClient(mine);
    }
  });
});
