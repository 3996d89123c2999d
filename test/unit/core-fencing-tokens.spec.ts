import { Lock, LockService } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { redisSuite, sleep } from './core-helpers';

describe('LockService: fencing tokens', () => {
  const suite = redisSuite();

  describe('fencing tokens', () => {
    it('are the Redis server time in µs, kept an hour after the last acquisition, and stay above earlier tokens when rolled back, ahead of the clock or lost', async () => {
      const locks = await suite.pool.make();
      const serverMicros = async () => {
        const [sec, micros] = await suite.client.time();
        return Number(sec) * 1_000_000 + Number(micros);
      };
      const before = await serverMicros();
      const first = await locks.acquire('fence:3');
      await first.release();
      const after = await serverMicros();
      // Taken from the clock, not counted from 1: a counter rolled back by a failover or a restart
      // cannot hand out a token again.
      expect(first.fencingToken).toBeGreaterThanOrEqual(before);
      expect(first.fencingToken).toBeLessThanOrEqual(after);
      expect(Number(await suite.client.get('test:{fence:3}:f'))).toBe(first.fencingToken);
      // Each acquisition keeps the last token for another hour.
      await suite.client.pexpire('test:{fence:3}:f', 60_000);
      const second = await locks.acquire('fence:3');
      await second.release();
      expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
      expect(await suite.client.pttl('test:{fence:3}:f')).toBeGreaterThan(3_590_000);
      // Rolled back, as on a replica promoted before it got the last grants: still above them all.
      await suite.client.set('test:{fence:3}:f', String(first.fencingToken - 5));
      const afterRollback = await locks.acquire('fence:3');
      await afterRollback.release();
      expect(afterRollback.fencingToken).toBeGreaterThan(second.fencingToken);
      // A last token ahead of the clock (the server clock stepped back): the next one is above it.
      const ahead = (await serverMicros()) + 10_000_000_000;
      await suite.client.set('test:{fence:3}:f', String(ahead));
      const third = await locks.acquire('fence:3');
      await third.release();
      expect(third.fencingToken).toBe(ahead + 1);
      // Lost altogether (eviction, restart): the clock alone is still above every token it handed out.
      await suite.client.del('test:{fence:3}:f');
      const fourth = await locks.acquire('fence:3');
      await fourth.release();
      expect(fourth.fencingToken).toBeGreaterThan(afterRollback.fencingToken);
      expect(Number.isSafeInteger(fourth.fencingToken)).toBe(true);
    });

    it('keep increasing after Redis lost every key (restart without persistence)', async () => {
      const own = await RedisProcess.start();
      const locks = new LockService({ redis: own.url, commandTimeout: 500 });
      try {
        await locks.onModuleInit();
        const before = await locks.acquire('fence:2');
        await before.release();
        await own.restart();
        const probe = own.client();
        expect(await probe.dbsize()).toBe(0);
        let after: Lock | undefined;
        for (let i = 0; i < 40 && !after; i++) after = await locks.acquire('fence:2').catch(() => sleep(50).then(() => undefined));
        expect(after).toBeDefined();
        expect(after!.fencingToken).toBeGreaterThan(before.fencingToken);
        await after!.release();
      } finally {
        await locks.close();
        await own.stop();
      }
    });
  });
});
