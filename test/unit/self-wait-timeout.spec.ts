import { LockService, LockTimeoutError } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { redisSuite } from './core-helpers';

// Reentrancy is per LockService and per async context: a nested call made after a bare acquire(), or under
// another LockService's lock on the same Redis (two lock modules), waits for its own caller until waitTimeout.
// The timeout used to blame "another owner"; it now says that this process holds the key, and what to do.
describe('a wait that timed out on a key this process holds', () => {
  const suite = redisSuite();

  it('after a bare acquire() on the same LockService: says this LockService holds it and that the call may wait for itself', async () => {
    const locks = await suite.pool.make();
    const outer = await locks.acquire('self:1');
    const error = (await locks.withLock('self:1', () => 'ran', { waitTimeout: 200 }).catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error.message).toMatch(/It is held by this LockService, taken \d+ ms ago outside this call's async context/);
    expect(error.message).toMatch(/waited for itself: nested calls are reentrant only inside withLock\(\) or @Locked of the same LockService/);
    expect(error.message).not.toMatch(/use one lock module/);
    await outer.release();
  });

  it('under another LockService of this process (two lock modules on one Redis): names it', async () => {
    const first = await suite.pool.make();
    const second = await suite.pool.make();
    const error = (await first.withLock('self:2', () => second.acquire('self:2', { waitTimeout: 200 })).catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error.message).toMatch(
      /held by another LockService of this process \(another lock module on Redis at 127\.0\.0\.1:\d+\).*use one lock module/,
    );
  });

  it('held by another process (a foreign token on the key): the plain message', async () => {
    const locks = await suite.pool.make();
    await suite.client.set('test:{self:3}', 'elsewhere.1000.token', 'PX', 5_000);
    const error = (await locks.acquire('self:3', { waitTimeout: 200 }).catch((e: unknown) => e)) as Error;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error.message).toMatch(/Another owner held it the whole time/);
    expect(error.message).not.toMatch(/this LockService|this process/);
    await suite.client.del('test:{self:3}');
  });

  // A review found both named as "another LockService of this process".
  it('not by a LockService of this process on another Redis, nor by a closed one whose lock was left to lapse', async () => {
    const other = await RedisProcess.start();
    try {
      const elsewhere = new LockService({ redis: other.url, keyPrefix: 'test:' });
      await elsewhere.onModuleInit();
      const there = await elsewhere.acquire('self:4');
      // Closed while its lock is still held by work that never ends: left to lapse, not released.
      const closing = await suite.pool.make({ ttl: 300, shutdownTimeout: 50 });
      await closing.acquire('self:4');
      await closing.close();
      await suite.client.set('test:{self:4}', 'elsewhere.1000.token', 'PX', 5_000);
      const locks = await suite.pool.make();
      const error = (await locks.acquire('self:4', { waitTimeout: 200 }).catch((e: unknown) => e)) as Error;
      expect(error).toBeInstanceOf(LockTimeoutError);
      expect(error.message).toMatch(/Another owner held it the whole time/);
      await there.release();
      await elsewhere.close();
    } finally {
      await other.stop();
      await suite.client.del('test:{self:4}');
    }
  });
});
