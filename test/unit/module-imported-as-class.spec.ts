import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DistributedLockModule, Locked, LockOptionsError } from '../../lib';
import { DistributedLockTestingModule } from '../../lib/testing';
import { RedisProcess, SharedRedis } from '../harness/redis-process';

@Injectable()
class Coupons {
  @Locked('coupon:<0>')
  async claim(id: string): Promise<string> {
    return id;
  }
}

@Module({ providers: [Coupons], exports: [Coupons] })
class CouponsModule {}

/**
 * `imports: [DistributedLockModule]` without `.forRoot(...)`: Nest failed with "can't resolve dependencies of the
 * LockService (?, …)" about DISTRIBUTED_LOCK_MODULE_OPTIONS, a token the user never wrote. The startup must fail
 * saying what to import instead.
 */
describe('a lock module imported as a class, without forRoot', () => {
  let redis: SharedRedis;
  beforeAll(async () => (redis = await RedisProcess.shared()));
  afterAll(() => redis.stop());

  const startupError = async (lockModule: unknown): Promise<unknown> =>
    Test.createTestingModule({ imports: [lockModule as typeof DistributedLockModule, CouponsModule] })
      .compile()
      .then(
        async (app) => {
          await app.close();
          return undefined;
        },
        (error: unknown) => error,
      );

  it.each([DistributedLockModule, DistributedLockTestingModule])(
    '%p fails the startup with a LockOptionsError naming forRoot',
    async (lockModule) => {
      const error = await startupError(lockModule);
      expect(error).toBeInstanceOf(LockOptionsError);
      expect((error as LockOptionsError).message).toMatch(/imported as a class\. Import DistributedLockModule\.forRoot\(/);
    },
  );

  it('forRoot on the same application starts and locks (control)', async () => {
    const app = await Test.createTestingModule({ imports: [DistributedLockModule.forRoot({ redis: redis.url }), CouponsModule] }).compile();
    await app.init();
    await expect(app.get(Coupons).claim('1')).resolves.toBe('1');
    await app.close();
  });
});
