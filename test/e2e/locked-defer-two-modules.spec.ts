/**
 * Two lock modules in one application (the root's, and a feature module's own with isGlobal: false), both with the
 * `defer` option. On one queue (the default name), each worker took every job of the queue: a feature class's job
 * taken by the root module's worker ran under the root's LockService (`root:{job:1}`), beside a direct call holding
 * the feature's lock on the same key (two runs at once). One queue for two modules is refused at startup now; with a
 * queue each, a feature job runs under the feature's lock, one at a time with the direct calls.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import '../harness/quiet-logs';
import { Deferred, DistributedLockError, DistributedLockModule, LockService, Locked } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil, sleep } from '../unit/core-helpers';

const state = { running: 0, most: 0, lockKeys: new Set<string>() };
let redis: RedisProcess;

@Injectable()
class FeatureJobs {
  constructor(readonly locks: LockService) {}

  @Locked('job:<0>', { onBusy: 'defer' })
  async run(id: string): Promise<string | Deferred> {
    state.running++;
    state.most = Math.max(state.most, state.running);
    for (const key of await redis.client().keys('*{job:1}')) state.lockKeys.add(key);
    await sleep(30);
    state.running--;
    return id;
  }
}

@Injectable()
class RootJobs {
  @Locked('root:<0>', { onBusy: 'defer' })
  async run(id: string): Promise<string | Deferred> {
    return id;
  }
}

describe('two lock modules with the defer option in one application', () => {
  beforeAll(async () => {
    redis = await RedisProcess.start();
  });
  afterAll(async () => {
    await redis.stop();
  });

  async function start(rootQueue: string, featureQueue: string) {
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'feature:', isGlobal: false, defer: { queueName: featureQueue } })],
      providers: [FeatureJobs],
    })
    class FeatureModule {}
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'root:', defer: { queueName: rootQueue } }), FeatureModule],
      providers: [RootJobs],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    return moduleRef.createNestApplication({ logger: false }).init();
  }

  it("on one queue: startup fails naming the queue (before: each worker ran the other module's jobs under its own LockService)", async () => {
    const error = await start('shared', 'shared').then(
      async (app) => {
        await app.close();
        return undefined;
      },
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DistributedLockError);
    expect((error as Error).message).toBe(
      'Two DistributedLockModule imports in this application defer on one queue, "shared": a worker takes every job of its queue, so ' +
        "each module's jobs would reach the other's worker. Give each module's defer option its own queueName.",
    );
  });

  it("with a queue each: a feature class's deferred calls run under the feature module's lock, never beside a direct call", async () => {
    const app = await start('root-jobs', 'feature-jobs');
    const connection = { host: redis.host, port: redis.port };
    const queues = [new Queue('root-jobs', { connection }), new Queue('feature-jobs', { connection })];
    const counts = async () => {
      const all = await Promise.all(queues.map((q) => q.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed')));
      return {
        completed: all.reduce((n, c) => n + c.completed, 0),
        pending: all.reduce((n, c) => n + c.waiting + c.active + c.delayed, 0),
        failed: all.reduce((n, c) => n + c.failed, 0),
      };
    };
    try {
      const jobs = app.get(FeatureJobs, { strict: false });
      for (let i = 0; i < 4; i++) {
        const held = await jobs.locks.acquire('job:1');
        expect(await jobs.run('1')).toBeInstanceOf(Deferred);
        await held.release();
      }
      // Direct calls while the jobs run (one that meets a running job defers too).
      for (let i = 0; i < 20; i++) {
        await jobs.run('1');
        await sleep(10);
      }
      expect(
        await pollUntil(
          async () => {
            const c = await counts();
            return c.completed >= 4 && c.pending === 0; // direct calls that met a running job deferred too
          },
          15_000,
          50,
        ),
      ).toBe(true);
      expect((await counts()).failed).toBe(0);
      expect(state.most).toBe(1);
      // The direct calls and the jobs alike under the feature module's LockService (its keyPrefix), the one FeatureJobs locks with.
      expect([...state.lockKeys].filter((key) => !key.endsWith(':f'))).toEqual(['feature:{job:1}']);
    } finally {
      await Promise.all(queues.map((q) => q.close()));
      await app.close();
    }
  });
});
