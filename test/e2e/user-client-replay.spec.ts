/**
 * A client you pass keeps ioredis' defaults: commands in flight when the connection drops are sent again once it is
 * back (`autoResendUnfulfilledCommands`), with `maxRetriesPerRequest: null` (BullMQ's setting) at any later
 * reconnect. An acquire whose caller was already told it failed (its commandTimeout ran out) was replayed on the
 * restarted server and held the key for its whole ttl, for a token nobody uses: the clean-up sent after the failure
 * had been refused while the connection was down. Now the replay's late reply is answered by that clean-up.
 */
import Redis, { type RedisOptions } from 'ioredis';
import { LockConnectionError, LockService } from '../../lib';
import { commandStats } from '../harness/command-stats';
import { RedisProcess } from '../harness/redis-process';
import { closeClient } from '../harness/redis-clients';
import { pollUntil, sleep } from '../unit/core-helpers';

describe("an acquire a user's client replays after a reconnect", () => {
  let redis: RedisProcess;
  beforeAll(async () => (redis = await RedisProcess.start()));
  afterAll(() => redis.stop());

  it.each<[string, RedisOptions]>([
    ['ioredis defaults', {}],
    ['maxRetriesPerRequest: null (a BullMQ connection)', { maxRetriesPerRequest: null }],
  ])('%s: the key it took after the caller was told it failed is given back once the connection is back', async (_, options) => {
    const mine = new Redis({ host: redis.host, port: redis.port, ...options });
    const locks = new LockService({ redis: mine, commandTimeout: 300, ttl: 20_000 });
    const other = new LockService({ redis: redis.url, commandTimeout: 300 });
    const probe = redis.client();
    try {
      await locks.onModuleInit();
      // The acquire reaches a frozen server, which then dies with it unread: ioredis keeps it to send again.
      redis.pause();
      const failed = locks.acquire('order:1').catch((error: unknown) => error);
      await sleep(50);
      await redis.kill9();
      const error = await failed;
      expect(error).toBeInstanceOf(LockConnectionError);
      await redis.restart();
      expect(await pollUntil(() => mine.status === 'ready', 5_000)).toBe(true);
      // Replayed on the restarted server (granted there), then given back by the late reply's clean-up.
      expect(await pollUntil(async () => (await probe.exists('lock:{order:1}')) === 0, 1_000)).toBe(true);
      // The fault fired: the restarted server ran the replayed acquire and the clean-up, nothing else of ours.
      const stats = await commandStats(probe);
      expect((stats.eval ?? 0) + (stats.evalsha ?? 0)).toBeGreaterThanOrEqual(2);
      const lock = await other.tryAcquire('order:1');
      expect(lock).not.toBeNull();
      await lock!.release();
    } finally {
      await Promise.all([locks.close(), other.close()]);
      await closeClient(mine);
    }
  });
});
