/**
 * The lock module imported twice in one application: globally in the root (keyPrefix 'root:') and,
 * with `isGlobal: false` and its own options, in a feature module (keyPrefix 'feature:', which could
 * be another Redis). Each class's `@Locked` must use the LockService its module sees, the one Nest
 * injects into its constructor: before, every singleton used the last module to start, so a root
 * service's `@Locked` and its own `withLock` on the same key took two different locks and ran at once.
 */
import 'reflect-metadata';
import { Injectable, INestApplicationContext, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { DistributedLockModule, LockService, Locked, lockKey } from '../../lib';
import { RedisProcess, type SharedRedis } from '../harness/redis-process';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Critical sections on the stock key running at once, and the most seen. */
const stock = { running: 0, most: 0 };
async function section(): Promise<void> {
  stock.running++;
  stock.most = Math.max(stock.most, stock.running);
  await sleep(150);
  stock.running--;
}

@Injectable()
class RootStock {
  constructor(readonly locks: LockService) {}

  @Locked('stock:<0>')
  async decrement(_id: string): Promise<void> {
    await section();
  }

  /** The same lock by hand, through the LockService Nest injected. */
  async decrementByHand(id: string): Promise<void> {
    await this.locks.withLock(lockKey('stock:<0>', id), section);
  }
}

@Injectable()
class FeatureJobs {
  constructor(readonly locks: LockService) {}

  @Locked('job:<0>')
  async run(_id: string): Promise<void> {
    await sleep(150);
  }
}

describe('@Locked with two lock modules in one application', () => {
  let redis: SharedRedis;
  let client: Redis;
  let app: INestApplicationContext | undefined;

  beforeAll(async () => {
    redis = await RedisProcess.shared();
    client = redis.client();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => redis.stop());

  it("each class's @Locked uses the LockService its module sees, the one injected into its constructor", async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'feature:', isGlobal: false })], providers: [FeatureJobs] })
    class FeatureModule {}
    @Module({ imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'root:' }), FeatureModule], providers: [RootStock] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    app = await moduleRef.init();
    const root = app.get(RootStock, { strict: false });
    const feature = app.get(FeatureJobs, { strict: false });
    expect(root.locks).not.toBe(feature.locks); // the setup: two services, by dependency injection

    Object.assign(stock, { running: 0, most: 0 });
    const calls = [root.decrement('1'), root.decrementByHand('1'), feature.run('1')];
    await sleep(50);
    const held = (await client.keys('*')).filter((k) => !/:[fqw]$/.test(k)).sort();
    await Promise.all(calls);
    // The root's @Locked and withLock share one lock (root:), the feature's job its own (feature:).
    expect(held).toEqual(['feature:{job:1}', 'root:{stock:1}']);
    expect(stock.most).toBe(1);
  });
});
