/**
 * An acquire whose reply is lost with its connection (a reset: a proxy or load balancer dropping it, Redis'
 * `timeout`, a network blip): Redis granted the key, the caller was told `LockConnectionError` ("nothing ran under
 * it"), and the clean-up sent at once was refused while the connection was down. Before, the key then stayed held for
 * its whole ttl by a token nobody uses, and every other service was told "busy". The clean-up is now sent again once
 * the connection is back (lib/redis/give-backs-after-reconnect.ts).
 */
import Redis from 'ioredis';
import { Lock, LockBusyError, LockConnectionError, LockService } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { TcpProxy } from '../harness/tcp-proxy';
import { pollUntil, sleep } from '../unit/core-helpers';

const TTL = 20_000;
const LINK_DELAY = 300;

describe('an acquire whose reply is lost with its connection', () => {
  let redis: RedisProcess;
  let proxy: TcpProxy;
  beforeAll(async () => {
    redis = await RedisProcess.start();
    proxy = await TcpProxy.start(redis.port);
  });
  afterAll(async () => {
    await proxy?.stop();
    await redis?.stop();
  });

  it('granted on Redis, then the connection is reset before the reply: the key is given back once the connection is back', async () => {
    const locks = new LockService({ redis: proxy.url, ttl: TTL, commandTimeout: 3_000 });
    const other = new LockService({ redis: redis.url });
    const probe = redis.client();
    try {
      await locks.onModuleInit();
      await other.onModuleInit();
      // Control: a lock held through the reset and the reconnect's clean-ups stays held.
      const held = await locks.acquire('order:held');
      proxy.setDelay(LINK_DELAY);
      const failed = locks.acquire('order:1').catch((error: unknown) => error);
      // The acquire reaches Redis after LINK_DELAY and is granted there; its reply is still in the proxy.
      expect(await pollUntil(async () => (await probe.exists('lock:{order:1}')) === 1, 2 * LINK_DELAY)).toBe(true);
      proxy.resetAll();
      const error = await failed;
      // The fault happened: the caller was told the acquire failed while Redis holds the key for its token.
      expect(error).toBeInstanceOf(LockConnectionError);
      const stray = await probe.get('lock:{order:1}');
      expect(stray).toMatch(new RegExp(`\\.${TTL}\\.`));
      expect(await probe.pttl('lock:{order:1}')).toBeGreaterThan(TTL - 5_000);
      proxy.setDelay(0);
      // Before: held for the rest of its 20 s ttl; now given back at the reconnect.
      expect(await pollUntil(async () => (await probe.exists('lock:{order:1}')) === 0, 5_000)).toBe(true);
      const next = await other.acquire('order:1', { onBusy: 'throw' });
      await next.release();
      // The held lock was not touched by the clean-ups.
      expect(held.isHeld()).toBe(true);
      expect(await other.acquire('order:held', { onBusy: 'throw' }).catch((e: unknown) => e)).toBeInstanceOf(LockBusyError);
      expect(await held.release()).toBe(true);
    } finally {
      proxy.setDelay(0);
      await locks.close();
      await other.close();
    }
  }, 30_000);

  it('a client you pass sends the acquire again after the reset: the key its first run took is its grant, not "busy"', async () => {
    // ioredis' defaults (autoResendUnfulfilledCommands) send the acquire again on the new connection; so does a Cluster
    // client after a reset (retryDelayOnFailover). The second run found the key held by its own token.
    const mine = new Redis({ host: '127.0.0.1', port: proxy.port });
    const locks = new LockService({ redis: mine, ttl: TTL, commandTimeout: 3_000 });
    const probe = redis.client();
    try {
      await locks.onModuleInit();
      proxy.setDelay(LINK_DELAY);
      const acquiring = locks.acquire('order:4', { onBusy: 'throw' }).catch((error: unknown) => error);
      expect(await pollUntil(async () => (await probe.exists('lock:{order:4}')) === 1, 2 * LINK_DELAY)).toBe(true);
      const token = await probe.get('lock:{order:4}');
      proxy.resetAll();
      proxy.setDelay(0);
      // Before: LockBusyError "held by another owner" while its own token held the key for the whole ttl.
      const lock = await acquiring;
      expect(lock).not.toBeInstanceOf(Error);
      // The fault happened: the acquire ran twice (granted, then again on the new connection), with one token.
      expect(await probe.get('lock:{order:4}')).toBe(token);
      expect(await (lock as Lock).release()).toBe(true);
      expect(await probe.exists('lock:{order:4}')).toBe(0);
    } finally {
      proxy.setDelay(0);
      await locks.close();
      mine.disconnect();
    }
  }, 30_000);

  it('a release refused while the connection was down is sent again once it is back: the key does not wait for its lease', async () => {
    const locks = new LockService({ redis: proxy.url, ttl: TTL, commandTimeout: 3_000 });
    const probe = redis.client();
    try {
      await locks.onModuleInit();
      const lock = await locks.acquire('order:3');
      proxy.blackhole(true);
      proxy.resetAll();
      // Before: "the key stays taken until its lease lapses" (20 s).
      expect(await lock.release().catch((error: unknown) => error)).toBeInstanceOf(LockConnectionError);
      // The fault happened: the release did not reach Redis.
      expect(await probe.get('lock:{order:3}')).toMatch(new RegExp(`\\.${TTL}\\.`));
      proxy.blackhole(false);
      expect(await pollUntil(async () => (await probe.exists('lock:{order:3}')) === 0, 5_000)).toBe(true);
    } finally {
      proxy.blackhole(false);
      await locks.close();
    }
  }, 30_000);

  it('a clean-up is not sent again once the lease it may have left is over', async () => {
    const locks = new LockService({ redis: proxy.url, ttl: 1_000, commandTimeout: 3_000 });
    const probe = redis.client();
    try {
      await locks.onModuleInit();
      const store = (locks.engine.store as unknown as { giveBacksAfterReconnect: { size: number } }).giveBacksAfterReconnect;
      proxy.setDelay(LINK_DELAY);
      const failed = locks.acquire('order:2').catch((error: unknown) => error);
      expect(await pollUntil(async () => (await probe.exists('lock:{order:2}')) === 1, 2 * LINK_DELAY)).toBe(true);
      proxy.blackhole(true);
      proxy.resetAll();
      expect(await failed).toBeInstanceOf(LockConnectionError);
      // Kept while the connection is down...
      expect(await pollUntil(() => store.size === 1, 1_000)).toBe(true);
      await sleep(1_200);
      proxy.setDelay(0);
      proxy.blackhole(false);
      // ...and dropped, unsent, at the reconnect after its 1 s lease: the key lapsed by itself.
      expect(await pollUntil(() => store.size === 0, 5_000)).toBe(true);
      expect(await probe.exists('lock:{order:2}')).toBe(0);
    } finally {
      proxy.setDelay(0);
      proxy.blackhole(false);
      await locks.close();
    }
  }, 30_000);
});
