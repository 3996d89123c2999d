/**
 * Shutdown among other modules' hooks, on a real Redis. Nest's app.close() runs onModuleDestroy, then
 * beforeApplicationShutdown, then onApplicationShutdown, each module by module (a global module among the last of
 * each phase, in the reverse of import order among globals). A module that closes its database in
 * onApplicationShutdown (as @nestjs/typeorm's global TypeOrmCoreModule does) must find the locked work drained:
 * the work, told through `lock.signal`, commits before the pool closes, whatever the import order. And from the
 * lock module's drain on, a new lock is refused with LockServiceClosedError, in any other module's later hook.
 */
import 'reflect-metadata';
import { DynamicModule, Global, Injectable, Module, OnApplicationBootstrap, Type } from '@nestjs/common';
import { Test, TestingModule } from '@nestjs/testing';
import { DistributedLockModule, LockService, LockServiceClosedError } from '../../lib';
import { RedisProcess, SharedRedis } from '../harness/redis-process';
import { sleep } from './locked-helpers';

const PREFIX = 'module-order:';

/** A fake database pool: a commit after close() fails, as a real pool's would. */
class FakeDb {
  open = true;
  constructor(private readonly events: string[]) {}

  async commit(): Promise<void> {
    await sleep(30);
    if (!this.open) throw new Error('Connection is closed');
    this.events.push('job committed');
  }

  close(hook: string): void {
    this.open = false;
    this.events.push(`db closed (${hook})`);
  }
}

type CloseHook = 'onApplicationShutdown' | 'onModuleDestroy';

interface Scenario {
  closeIn: CloseHook;
  dbGlobal: boolean;
  dbFirst: boolean;
}

/** An application: a lock module, a DB module closing its pool in `closeIn`, and a job holding a lock until told to stop. */
function appModule(redisUrl: string, { closeIn, dbGlobal, dbFirst }: Scenario, events: string[]): Type<unknown> {
  const db = new FakeDb(events);

  @Injectable()
  class DbPool {
    onApplicationShutdown(): void {
      if (closeIn === 'onApplicationShutdown') db.close(closeIn);
    }
    onModuleDestroy(): void {
      if (closeIn === 'onModuleDestroy') db.close(closeIn);
    }
  }
  @Module({ providers: [DbPool, { provide: FakeDb, useValue: db }], exports: [FakeDb] })
  class DbModule {}
  if (dbGlobal) Global()(DbModule);

  @Injectable()
  class Importer implements OnApplicationBootstrap {
    constructor(
      private readonly locks: LockService,
      private readonly pool: FakeDb,
    ) {}

    onApplicationBootstrap(): void {
      // Follows the docs: works until lock.signal aborts, then commits what it did and returns.
      void this.locks
        .withLock('import:nightly', async (lock) => {
          events.push('job holds the lock');
          await new Promise((resolve) => lock.signal.addEventListener('abort', resolve, { once: true }));
          events.push('job told to stop');
          await this.pool.commit().catch((error: Error) => events.push(`commit failed: ${error.message}`));
        })
        // Its release: the drain lets the connection close once the release command is written, not answered.
        .catch((error: Error) => events.push(`withLock failed: ${error.message}`));
    }

    /** Another module's later hook: may it still take a lock? */
    async beforeApplicationShutdown(): Promise<void> {
      const outcome = await this.locks.tryAcquire('import:other').then(
        async (lock) => {
          await lock?.release();
          return 'granted';
        },
        (error: Error) => error.constructor.name,
      );
      events.push(`acquire in beforeApplicationShutdown: ${outcome}`);
    }
  }
  @Module({ imports: dbGlobal ? [] : [DbModule], providers: [Importer] })
  class ImportModule {}

  const lockModule: DynamicModule = DistributedLockModule.forRoot({ redis: redisUrl, keyPrefix: PREFIX, shutdownTimeout: 3_000 });
  const imports = dbFirst ? [DbModule, lockModule, ImportModule] : [lockModule, DbModule, ImportModule];
  @Module({ imports })
  class AppModule {}
  return AppModule;
}

describe('shutdown drains locked work before other modules close their connections', () => {
  let redis: SharedRedis;
  const apps: TestingModule[] = [];

  beforeAll(async () => {
    redis = await RedisProcess.shared();
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((app) => app.close()));
  });
  afterAll(() => redis.stop());

  async function runShutdown(scenario: Scenario): Promise<string[]> {
    const events: string[] = [];
    const app = await Test.createTestingModule({ imports: [appModule(redis.url, scenario, events)] }).compile();
    await app.init();
    for (let i = 0; i < 100 && !events.includes('job holds the lock'); i++) await sleep(10);
    expect(events).toContain('job holds the lock');
    await app.close();
    return events;
  }

  describe.each([
    ['a global DB module', true],
    ['a DB module imported where it is used', false],
  ])('%s closing its pool in onApplicationShutdown', (_, dbGlobal) => {
    it.each([
      ['the lock module imported first', false],
      ['the DB module imported first', true],
    ])('with %s: the job commits before the pool closes; later hooks get no new lock', async (__, dbFirst) => {
      const events = await runShutdown({ closeIn: 'onApplicationShutdown', dbGlobal, dbFirst });
      expect(events).toEqual([
        'job holds the lock',
        'job told to stop',
        'job committed',
        'acquire in beforeApplicationShutdown: LockServiceClosedError',
        'db closed (onApplicationShutdown)',
      ]);
    });
  });

  // onModuleDestroy runs module by module too, global modules last, the globals in the reverse of their import
  // order: the drain (in the lock module's onModuleDestroy) precedes only the modules that come after it.
  it('a global DB module closing in onModuleDestroy, imported before the lock module: the job commits before the pool closes', async () => {
    const events = await runShutdown({ closeIn: 'onModuleDestroy', dbGlobal: true, dbFirst: true });
    expect(events).toEqual([
      'job holds the lock',
      'job told to stop',
      'job committed',
      'db closed (onModuleDestroy)',
      'acquire in beforeApplicationShutdown: LockServiceClosedError',
    ]);
  });

  it.each([
    ['a global DB module imported after the lock module', true],
    ['a DB module imported where it is used', false],
  ])('%s, closing in onModuleDestroy, closes before the drain begins (what Nest’s order allows, as documented)', async (_, dbGlobal) => {
    const events = await runShutdown({ closeIn: 'onModuleDestroy', dbGlobal, dbFirst: false });
    expect(events.slice(0, 4)).toEqual([
      'job holds the lock',
      'db closed (onModuleDestroy)',
      'job told to stop',
      'commit failed: Connection is closed',
    ]);
  });

  it('LockService.close() called directly keeps its meaning: drains the locked work, then closes', async () => {
    const events: string[] = [];
    const app = await Test.createTestingModule({
      imports: [appModule(redis.url, { closeIn: 'onApplicationShutdown', dbGlobal: true, dbFirst: false }, events)],
    }).compile();
    apps.push(app);
    await app.init();
    for (let i = 0; i < 100 && !events.includes('job holds the lock'); i++) await sleep(10);
    const locks = app.get(LockService);
    await locks.close();
    expect(events).toEqual(['job holds the lock', 'job told to stop', 'job committed']);
    await expect(locks.acquire('import:later')).rejects.toBeInstanceOf(LockServiceClosedError);
  });
});
