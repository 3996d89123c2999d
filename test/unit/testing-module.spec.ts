/**
 * What only the testing entry point has: the module's Nest wiring (forRoot / forRootAsync, global,
 * `redis` not needed) and LockTestingController's levers (hold, expire, isLocked, waiting, createService).
 * The lock semantics themselves are the shared behaviour suite's (test/shared/lock-behaviour.suite.ts).
 */
import 'reflect-metadata';
import { Injectable, INestApplicationContext, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DistributedLockError, Locked, LockBusyError, LockLostError, LockOptionsError, LockService, LockServiceClosedError } from '../../lib';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

@Injectable()
class Billing {
  @Locked('invoice:<0>', { onBusy: 'fail-fast', fallback: 'skipped' })
  async send(id: string) {
    return `sent ${id}`;
  }
}

@Module({ providers: [Billing], exports: [Billing] })
class BillingModule {}

describe('DistributedLockTestingModule', () => {
  const apps: INestApplicationContext[] = [];
  const services: LockService[] = [];

  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
    await Promise.all(services.splice(0).map((s) => s.close()));
  });

  async function start(lockModule: ReturnType<typeof DistributedLockTestingModule.forRoot>): Promise<INestApplicationContext> {
    const moduleRef = await Test.createTestingModule({ imports: [lockModule, BillingModule] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    apps.push(app);
    return app;
  }

  it('forRoot without redis: @Locked in another module finds the LockService (global); hold() makes its key busy', async () => {
    const app = await start(DistributedLockTestingModule.forRoot({ ttl: 5_000 }));
    const testing = app.get(LockTestingController);
    expect(await app.get(Billing).send('1')).toBe('sent 1');
    // null options are a typed error (they were a TypeError), not a hold
    expect(() => testing.hold('invoice:1', null as never)).toThrow(DistributedLockError);
    expect(testing.isLocked('invoice:1')).toBe(false);
    const other = testing.hold('invoice:1');
    expect(testing.isLocked('invoice:1')).toBe(true);
    expect(await app.get(Billing).send('1')).toBe('skipped');
    expect(other.release()).toBe(true);
    expect(other.release()).toBe(false);
    expect(await app.get(Billing).send('1')).toBe('sent 1');
  });

  it('forRootAsync takes the same options from a factory, and the same object as production (redis is ignored)', async () => {
    const app = await start(
      DistributedLockTestingModule.forRootAsync({
        useFactory: () => Promise.resolve({ redis: 'redis://nowhere:1', ttl: 1_234, onBusy: 'throw' as const }),
      }),
    );
    const locks = app.get(LockService);
    const lock = await locks.acquire('a');
    expect(lock.options.ttl).toBe(1_234);
    app.get(LockTestingController).hold('b');
    await expect(locks.acquire('b')).rejects.toBeInstanceOf(LockBusyError);
    await lock.release();
  });

  it('validates options as the real module does', async () => {
    await expect(start(DistributedLockTestingModule.forRoot({ ttl: 5 }))).rejects.toBeInstanceOf(LockOptionsError);
  });

  it('hold() of a held key, or with a bad ttl or key, throws a typed error', async () => {
    const testing = new LockTestingController();
    testing.hold('k');
    expect(() => testing.hold('k')).toThrow(DistributedLockError);
    expect(() => testing.hold('k2', { ttl: 1 })).toThrow(LockOptionsError);
    expect(() => testing.hold('')).toThrow(DistributedLockError);
    // A misspelt ttl held the key until release() (a test waiting for it to lapse waited in vain), an array likewise.
    expect(() => testing.hold('k3', { TTL: 100 } as never)).toThrow(
      'Invalid option "hold("k3", options).TTL": is not an option; did you mean ttl? The options are: ttl.',
    );
    expect(() => testing.hold('k3', [] as never)).toThrow(/hold\("k3", options\): expected \{ ttl\? \} or nothing, got an array/);
    expect(testing.isLocked('k3')).toBe(false);
  });

  it("hold().release() and expire() hand the key to the first waiter at once; expire() of a held lock aborts the holder's signal", async () => {
    const testing = new LockTestingController();
    // The waiter's safety-net refresh (every 80-100 % of waiterLease / 3) comes after its waitTimeout, so only
    // a handover wakes it in time; renewed every 300 ms, a stalled event loop does not let the lease lapse.
    const locks = testing.createService({ ttl: 900, waiterLease: 30_000 });
    services.push(locks);
    const other = testing.hold('k');
    const waiting = locks.acquire('k', { waitTimeout: 5_000 });
    await sleep(20);
    expect(testing.waiting('k')).toBe(1);
    const releasedAt = performance.now();
    other.release();
    const lock = await waiting;
    // At once when idle; 1 s leaves a loaded machine's stalls (a CI run: 246 ms) apart from a missed handover (5 s).
    expect(performance.now() - releasedAt).toBeLessThan(1_000);
    expect(lock.fencingToken).toBeGreaterThan(other.fencingToken);
    expect(testing.waiting('k')).toBe(0);

    const next = locks.acquire('k', { waitTimeout: 5_000 });
    await sleep(20);
    expect(testing.expire('k')).toBe(true);
    const taken = await next;
    expect(taken.fencingToken).toBeGreaterThan(lock.fencingToken);
    // The old holder hears of it at its next renewal, within a third of its ttl.
    const reason = await new Promise<unknown>((resolve) => lock.signal.addEventListener('abort', () => resolve(lock.signal.reason)));
    expect(reason).toBeInstanceOf(LockLostError);
    expect(await lock.release()).toBe(false);
    expect(await taken.release()).toBe(true);
    expect(testing.expire('k')).toBe(false);
  });

  it('services made by one controller share its locks; each controller has its own', async () => {
    const testing = new LockTestingController();
    const a = testing.createService();
    const b = testing.createService();
    const elsewhere = new LockTestingController().createService();
    services.push(a, b, elsewhere);
    const lock = await a.acquire('shared');
    expect(await b.tryAcquire('shared')).toBeNull();
    const separate = await elsewhere.tryAcquire('shared');
    expect(separate).not.toBeNull();
    await separate!.release();
    await lock.release();
  });

  it('a closed service stops its waiters and takes no new locks, as on Redis', async () => {
    const testing = new LockTestingController();
    const locks = testing.createService();
    testing.hold('k');
    const waiting = locks.acquire('k', { waitTimeout: 5_000 }).catch((e: unknown) => e);
    await sleep(20);
    await locks.close();
    expect(await waiting).toBeInstanceOf(LockServiceClosedError);
    expect(testing.waiting('k')).toBe(0);
    await expect(locks.acquire('other')).rejects.toBeInstanceOf(LockServiceClosedError);
  });
});
