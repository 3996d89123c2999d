/**
 * getStats() counts what the metrics count (docs/design.md, "Metrics and spans"): one acquisition per lock taken,
 * one connection error per call that failed on Redis. Dashboards read `acquired - released` as the locks held now
 * and `connectionErrors` as the calls Redis failed.
 */
import { Lock, LockConnectionError, LockService } from '../../lib';
import { OtelCapture } from '../harness/otel-capture';
import { RedisProcess } from '../harness/redis-process';
import { redisSuite, sleep } from './core-helpers';

describe('getStats()', () => {
  const suite = redisSuite();
  let otel: OtelCapture;
  beforeEach(() => {
    otel = new OtelCapture();
    otel.install();
  });
  afterEach(() => otel.uninstall());

  it('reentrant nested calls that only borrow held keys are not acquisitions: acquired equals released afterwards', async () => {
    const locks = await suite.pool.make();
    await locks.withLock('cart:1', async () => {
      await locks.withLock('cart:1', () => 'nested', { name: 'nested' });
      await (await locks.acquire('cart:1', { name: 'nested' })).release();
      // Borrows cart:1, takes cart:2: one acquisition.
      await locks.withLock(['cart:1', 'cart:2'], () => 'partly nested', { name: 'partly' });
    });

    expect(locks.getStats()).toMatchObject({ acquired: 2, released: 2 });
    expect(await otel.total('lock.acquire.attempts', { 'lock.outcome': 'acquired' })).toBe(2);
    expect(await otel.total('lock.hold.duration')).toBe(2);
  });

  it('a multi-key acquisition that fails on a frozen Redis is one connection error, not one more for its first key given back', async () => {
    const own = await RedisProcess.start();
    const options = { redis: own.url, keyPrefix: 'test:', commandTimeout: 300, waiterLease: 600 };
    const locks = new LockService(options);
    const holder = new LockService(options);
    let held: Lock | undefined;
    try {
      await locks.onModuleInit();
      await holder.onModuleInit();
      held = await holder.acquire('pair:b', { ttl: 5_000, watchdog: false });
      // pair:a is taken, then the call queues for pair:b.
      const both = locks.acquire(['pair:a', 'pair:b'], { name: 'pair', waitTimeout: 5_000 }).catch((error: unknown) => error);
      await sleep(100);
      own.pause();
      expect(await both).toBeInstanceOf(LockConnectionError);
      // pair:a's give-back (not awaited by the failed call) times out on the frozen Redis too.
      await sleep(2 * options.commandTimeout);
    } finally {
      own.resume();
      await held?.release();
      await Promise.all([locks.close(), holder.close()]);
      await own.stop();
    }

    expect(locks.getStats()).toMatchObject({ acquired: 0, connectionErrors: 1 });
    expect(await otel.total('lock.acquire.attempts', { 'lock.name': 'pair', 'lock.outcome': 'error' })).toBe(1);
    expect(await otel.total('lock.release.errors')).toBe(0);
  });
});
