/**
 * One application, one global lock module. Two (a shared module's forRoot and the app's, both global by default; or
 * the testing module added beside an app module that imports the real one) gave providers the LockService of one and
 * `app.get(LockService)` the other's: another keyPrefix (or Redis), so the same key was locked twice without
 * exclusion. Startup now fails, naming both. Nothing here connects: the check runs before any module starts, and a
 * lock module that does start is the in-memory testing module.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { DistributedLockModule, LockOptionsError, LockService } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';

/** Never reached: the startup fails before anything connects (and 1 is no Redis port). */
const UNREACHED = 'redis://:secret@127.0.0.1:1';

@Injectable()
class Billing {
  constructor(readonly locks: LockService) {}
}

/** The outcome of compiling and starting `imports`: the error, or the started module (closed by the test). */
async function start(imports: Parameters<typeof Test.createTestingModule>[0]['imports']): Promise<TestingModule | Error> {
  try {
    const moduleRef = await Test.createTestingModule({ imports }).compile();
    await moduleRef.init();
    return moduleRef;
  } catch (error) {
    return error as Error;
  }
}

async function expectStartupError(imports: Parameters<typeof start>[0]): Promise<LockOptionsError> {
  const outcome = await start(imports);
  if (!(outcome instanceof Error)) await outcome.close();
  expect(outcome).toBeInstanceOf(LockOptionsError);
  return outcome as LockOptionsError;
}

describe('one global lock module per application', () => {
  it('two global DistributedLockModule.forRoot fail the startup, naming both (no password) and what to do', async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ redis: UNREACHED, keyPrefix: 'infra:' })] })
    class InfraModule {}
    @Module({ imports: [DistributedLockModule.forRoot({ redis: UNREACHED, keyPrefix: 'app:' }), InfraModule], providers: [Billing] })
    class AppModule {}

    const error = await expectStartupError([AppModule]);
    expect(error.option).toBe('isGlobal');
    expect(error.message).toMatch(/2 global lock modules/);
    expect(error.message).toContain('DistributedLockModule (keyPrefix "app:", redis redis://:***@127.0.0.1:1)');
    expect(error.message).toContain('DistributedLockModule (keyPrefix "infra:", redis redis://:***@127.0.0.1:1)');
    expect(error.message).not.toContain('secret');
    expect(error.message).toMatch(/isGlobal: false and import it where it is used/);
  });

  it('the testing module added beside an app module that imports the real one fails the startup, naming both', async () => {
    @Module({ imports: [DistributedLockModule.forRoot({ redis: UNREACHED, keyPrefix: 't2:' })], providers: [Billing] })
    class AppModule {}

    const error = await expectStartupError([AppModule, DistributedLockTestingModule.forRoot({})]);
    expect(error.message).toContain('DistributedLockModule (keyPrefix "t2:"');
    expect(error.message).toContain('DistributedLockTestingModule (keyPrefix "lock:", in memory)');
  });

  it('a forRootAsync module counts too, named by its options once built (else as "options from forRootAsync")', async () => {
    const error = await expectStartupError([
      DistributedLockTestingModule.forRoot({ keyPrefix: 'a:' }),
      DistributedLockTestingModule.forRootAsync({ useFactory: () => ({ keyPrefix: 'b:' }) }),
    ]);
    expect(error.message).toContain('DistributedLockTestingModule (keyPrefix "a:", in memory)');
    // Nest built this factory's options before the check here; in another build order they are not known yet.
    expect(error.message).toMatch(/DistributedLockTestingModule \((keyPrefix "b:", in memory|options from forRootAsync)\)/);
  });

  it('overrideModule(the dynamic module object the app imports).useModule(the testing module) swaps it: one module, in memory', async () => {
    const real = DistributedLockModule.forRoot({ redis: UNREACHED, keyPrefix: 'swap:' });
    @Module({ imports: [real], providers: [Billing] })
    class AppModule {}

    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideModule(real)
      .useModule(DistributedLockTestingModule.forRoot({ keyPrefix: 'swap:' }))
      .compile();
    const app = await moduleRef.init();
    try {
      const testing = app.get(LockTestingController);
      const held = testing.hold('invoice:42');
      expect(await app.get(Billing).locks.tryAcquire('invoice:42')).toBeNull(); // the same in-memory locks
      held.release();
      expect(app.get(Billing).locks).toBe(app.get(LockService));
    } finally {
      await app.close();
    }
  });

  it('a global module and a non-global one in one application, and two applications in one process, start', async () => {
    @Module({ imports: [DistributedLockTestingModule.forRoot({ keyPrefix: 'feature:', isGlobal: false })], providers: [Billing] })
    class FeatureModule {}
    const first = await start([DistributedLockTestingModule.forRoot({ keyPrefix: 'root:' }), FeatureModule]);
    const second = await start([DistributedLockTestingModule.forRoot({ keyPrefix: 'root:' })]);
    try {
      expect(first).not.toBeInstanceOf(Error);
      expect(second).not.toBeInstanceOf(Error);
    } finally {
      for (const app of [first, second]) if (!(app instanceof Error)) await app.close();
    }
  });
});
