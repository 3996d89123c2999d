/**
 * The FIFO wait queue: waiters get the key in the order they queued; a waiter that dies (kill -9)
 * while queued stalls the queue no longer than its waiter lease; and a holder that releases and
 * immediately asks again cannot barge past someone already waiting.
 */
import * as path from 'path';
import type Redis from 'ioredis';
import { DistributedLockModuleOptions, Lock, LockService } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { killSurvivors, startWorker, WorkerHandle } from '../harness/worker-process';
import { SettleTracker } from './workers/support/settle-tracker';
import { isAlive, pollUntil, sleep } from './workers/support/timing';

const WAITER_LEASE = 1_000;
const HOLDER = path.join(__dirname, 'workers', 'holder.worker.ts');

describe('fair queue', () => {
  let redis: RedisProcess;
  let client: Redis;
  const services: LockService[] = [];
  const workers: WorkerHandle[] = [];
  const calls = new SettleTracker();

  beforeAll(async () => {
    redis = await RedisProcess.start();
    client = redis.client();
  });
  afterEach(async () => {
    await Promise.all(services.splice(0).map((s) => s.close()));
    expect(calls.pending()).toEqual([]);
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await redis.stop();
  });
  afterAll(() => expect(killSurvivors()).toEqual([]));

  async function makeService(options: Partial<DistributedLockModuleOptions> = {}): Promise<LockService> {
    const service = new LockService({ redis: redis.url, keyPrefix: 'fq:', ttl: 5_000, waitTimeout: 10_000, waiterLease: WAITER_LEASE, ...options });
    services.push(service);
    await service.onModuleInit();
    return service;
  }

  const queueOf = (key: string) => client.lrange(`fq:{${key}}:q`, 0, -1);
  const queueLength = async (key: string, n: number) => pollUntil(async () => (await client.llen(`fq:{${key}}:q`)) === n, 2_000);

  it('5 waiters queued in a known order get the lock in that order', async () => {
    const holder = await makeService();
    const held = await holder.acquire('fifo');
    const order: number[] = [];
    const locks: Lock[] = [];
    const waits: Array<Promise<void>> = [];
    for (let i = 0; i < 5; i++) {
      const service = await makeService();
      waits.push(
        calls.track(
          `waiter ${i}`,
          service.acquire('fifo').then(async (lock) => {
            order.push(i);
            locks[i] = lock;
            await sleep(20);
            await lock.release();
          }),
        ),
      );
      // Queue the next one only once this one has its place: the order is known, not a race.
      expect(await queueLength('fifo', i + 1)).toBe(true);
    }
    const queued = await queueOf('fifo');
    await held.release();
    await Promise.all(waits);

    console.log(`FIFO: order ${order.join(',')}, fences ${locks.map((l) => l.fencingToken).join(' < ')}`);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(locks.map((l) => l.token)).toEqual(queued);
    for (let i = 1; i < 5; i++) expect(locks[i].fencingToken).toBeGreaterThan(locks[i - 1].fencingToken);
    expect(await client.exists('fq:{fifo}', 'fq:{fifo}:q', 'fq:{fifo}:w')).toBe(0);
  });

  it('a queued waiter killed with -9 blocks the queue no longer than its waiter lease', async () => {
    const holder = await makeService();
    const held = await holder.acquire('dead');

    const dead = startWorker(HOLDER, {
      env: { REDIS_URL: redis.url, KEY: 'dead', KEY_PREFIX: 'fq:', TTL: '5000', WAITER_LEASE: String(WAITER_LEASE), WAIT_TIMEOUT: '30000' },
    });
    workers.push(dead);
    await dead.waitFor((l) => l.event === 'ready', 10_000);
    expect(await queueLength('dead', 1)).toBe(true);
    const [deadToken] = await queueOf('dead');

    const live = await makeService();
    let liveAt = 0;
    const waiting = calls.track(
      'live waiter',
      live.acquire('dead').then((lock) => {
        liveAt = performance.now();
        return lock;
      }),
    );
    expect(await queueLength('dead', 2)).toBe(true);

    const exit = await dead.kill9();
    expect(exit.signal).toBe('SIGKILL');
    expect(isAlive(dead.pid)).toBe(false);
    expect(dead.lines.some((l) => l.event === 'acquired')).toBe(false);
    // The dead waiter is still at the head when the key is released: it really is in the way.
    expect((await queueOf('dead'))[0]).toBe(deadToken);
    const releasedAt = performance.now();
    expect(await held.release()).toBe(true);

    const lock = await waiting;
    const waited = liveAt - releasedAt;
    console.log(`dead waiter: the live waiter got the key ${waited.toFixed(1)} ms after the release (waiter lease ${WAITER_LEASE} ms)`);
    expect(waited).toBeLessThanOrEqual(WAITER_LEASE + 500);
    expect(await client.lrange('fq:{dead}:q', 0, -1)).not.toContain(deadToken);
    expect(await client.zscore('fq:{dead}:w', deadToken)).toBeNull();
    expect(await lock.release()).toBe(true);
  });

  it('a holder that releases and asks again at once cannot barge past a queued waiter', async () => {
    const first = await makeService();
    const second = await makeService();
    const held = await first.acquire('barge');
    const events: string[] = [];
    const waiting = calls.track(
      'queued waiter',
      second.acquire('barge').then(async (lock) => {
        events.push('waiter acquired');
        await sleep(50);
        events.push('waiter releases');
        await lock.release();
        return lock;
      }),
    );
    expect(await queueLength('barge', 1)).toBe(true);

    expect(await held.release()).toBe(true);
    const again = await calls.track('re-acquire', first.acquire('barge'));
    events.push('holder re-acquired');
    const waiterLock = await waiting;

    console.log(`barge: ${events.join(' -> ')}`);
    expect(events).toEqual(['waiter acquired', 'waiter releases', 'holder re-acquired']);
    expect(again.fencingToken).toBeGreaterThan(waiterLock.fencingToken);
    expect(waiterLock.fencingToken).toBeGreaterThan(held.fencingToken);
    expect(await again.release()).toBe(true);
  });
});
