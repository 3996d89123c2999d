/** The `defer` module option: validated, BullMQ loaded only with it, and startup refusing what a worker could not run. */
import { Injectable, Module, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, Locked, LockOptionsError } from '../../lib';
import { resolveDeferOptions } from '../../lib/defer/resolve-defer-options';
import { redisSuite } from './core-helpers';

@Injectable()
class Deferring {
  @Locked('d:<0>', { onBusy: 'defer' })
  async run(id: string): Promise<string | Deferred> {
    return id;
  }
}

describe('defer module option', () => {
  const suite = redisSuite();

  it('is validated with the option named', () => {
    expect(resolveDeferOptions(undefined)).toBeUndefined();
    expect(resolveDeferOptions({})).toEqual({
      queueName: 'distributed-lock-deferred',
      concurrency: 1,
      worker: true,
      attempts: 5,
      backoff: 1000,
      jobLease: 30_000,
    });
    expect(() => resolveDeferOptions({ concurrency: 0 })).toThrow(LockOptionsError);
    expect(() => resolveDeferOptions({ attempts: 1.5 })).toThrow(/defer\.attempts/);
    expect(() => resolveDeferOptions({ queueName: 'a:b' })).toThrow(/defer\.queueName/);
    expect(() => resolveDeferOptions({ worker: 'yes' as never })).toThrow(/defer\.worker/);
    expect(() => resolveDeferOptions({ jobLease: 5 })).toThrow(/defer\.jobLease/);
  });

  it("a deferring method without the module's defer option fails startup, naming the method", async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ redis: suite.redis.url, keyPrefix: 'test:' })], providers: [Deferring] })
    class AppModule {}
    const ref = await Test.createTestingModule({ imports: [AppModule] }).compile();
    await expect(ref.init()).rejects.toThrow(/Deferring\.run use onBusy 'defer', but DistributedLockModule has no "defer" option/);
    await ref.close().catch(() => undefined); // close() rethrows the failed init, after closing
  });

  it('a deferring method on a request-scoped provider fails startup (the worker runs outside any request)', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Locked('r:<0>', { onBusy: 'defer' })
      async run(id: string): Promise<string | Deferred> {
        return id;
      }
    }
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: suite.redis.url, keyPrefix: 'test:', defer: { worker: true } })],
      providers: [PerRequest],
    })
    class AppModule {}
    const ref = await Test.createTestingModule({ imports: [AppModule] }).compile();
    await expect(ref.init()).rejects.toThrow(/needs a singleton provider/);
    await ref.close().catch(() => undefined); // close() rethrows the failed init, after closing
  });
});

describe('without bullmq', () => {
  const suite = redisSuite();

  it('the library loads and locks without ever requiring bullmq; a defer option says to install it', async () => {
    let requires = 0;
    try {
      let lib!: typeof import('../../lib');
      let deferQueue!: typeof import('../../lib/defer/bullmq-defer-queue');
      jest.isolateModules(() => {
        jest.doMock('bullmq', () => {
          requires++;
          throw Object.assign(new Error("Cannot find module 'bullmq'"), { code: 'MODULE_NOT_FOUND' });
        });
        // A fresh copy of the library in this registry, where bullmq cannot be loaded.
        /* eslint-disable @typescript-eslint/no-require-imports */
        lib = require('../../lib') as typeof import('../../lib');
        deferQueue = require('../../lib/defer/bullmq-defer-queue') as typeof import('../../lib/defer/bullmq-defer-queue');
        /* eslint-enable @typescript-eslint/no-require-imports */
      });
      const locks = new lib.LockService({ redis: suite.redis.url, keyPrefix: 'test:' });
      await locks.onModuleInit();
      await expect(locks.withLock('plain', () => 'done')).resolves.toBe('done');
      expect(requires).toBe(0); // importing and using the library never touches bullmq
      const settings = resolveDeferOptions({})!;
      const limits = { commandTimeout: 1_000, shutdownTimeout: 1_000 };
      expect(() => new deferQueue.BullmqDeferQueue(settings, suite.redis.url, limits, locks.engine.metrics, locks.engine.logger)).toThrow(
        /needs the bullmq package: npm install bullmq/,
      );
      await locks.close();
      expect(requires).toBe(1);
    } finally {
      jest.dontMock('bullmq');
    }
  });
});
