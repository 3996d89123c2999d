/**
 * The FIFO wait queue: waiters get the key in the order they queued; a waiter that dies (kill -9)
 * while queued stalls the queue no longer than its waiter lease; a holder that releases and
 * immediately asks again cannot barge past someone already waiting; and a key that becomes free
 * without a release handing it over (a killed holder's lease lapsed, a minHold release ran out)
 * still goes to the live waiter at the head of the queue, never to a newcomer that happens to ask
 * while that waiter has not looked yet.
 */
import * as fs from 'fs';
import * as path from 'path';
import type Redis from 'ioredis';
import { DistributedLockModuleOptions, Lock, LockBusyError, LockService, LockTimeoutError } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { Seen, startMonitor } from '../harness/redis-monitor';
import { killSurvivors, startWorker, WorkerHandle } from '../harness/worker-process';
import { SettleTracker } from './workers/support/settle-tracker';
import { isAlive, pollUntil, sleep } from './workers/support/timing';

const WAITER_LEASE = 1_000;
/**
 * For the "free key, live waiter" cases: a waiter told the holder has long left looks at the key
 * again when it refreshes its place, waiterLease / 3 × (0.8 … 1) = 800 … 1,000 ms later. A key that
 * becomes free before then without a release handing it over (a minHold release running out, a
 * stopped waiter outliving a dead holder's lease) sits free, promised to that waiter.
 */
const SLOW_REFRESH_LEASE = 3_000;
const HOLDER = path.join(__dirname, 'workers', 'holder.worker.ts');

/** Linux process state letter from /proc (T = stopped by a signal). */
function procState(pid: number): string {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
}

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

  /**
   * A service that has waited once already, so its wake channel is subscribed: its next wait is one
   * attempt and then sleep (a first wait retries at once after subscribing, and would see a changed key).
   */
  async function subscribedService(options: Partial<DistributedLockModuleOptions>): Promise<LockService> {
    const service = await makeService(options);
    const blocker = await (await makeService()).acquire('warm-up');
    // The wait subscribes once its first attempt is answered within it; on a loaded machine that
    // attempt alone can outlast 50 ms, so wait again until one got that far (bounded).
    const waitedOnce = async () => {
      await expect(service.acquire('warm-up', { waitTimeout: 50 })).rejects.toBeInstanceOf(LockTimeoutError);
      return service.engine.wakeChannel.subscribed;
    };
    expect(await pollUntil(waitedOnce, 10_000, 0)).toBe(true);
    expect(await blocker.release()).toBe(true);
    expect(service.engine.wakeChannel.subscribed).toBe(true);
    return service;
  }

  const queueOf = (key: string) => client.lrange(`fq:{${key}}:q`, 0, -1);
  const queueLength = async (key: string, n: number) => pollUntil(async () => (await client.llen(`fq:{${key}}:q`)) === n, 2_000);
  const serverMs = async () => {
    const [sec, micros] = await client.time();
    return Number(sec) * 1_000 + Math.floor(Number(micros) / 1_000);
  };

  /**
   * The situation the queue exists for: the key is free in Redis and `waiterToken` is at the head of
   * its queue with a place that has not lapsed (a live waiter that simply has not looked yet).
   */
  async function expectFreeAndPromised(key: string, waiterToken: string): Promise<void> {
    expect(await client.exists(`fq:{${key}}`)).toBe(0);
    expect((await queueOf(key))[0]).toBe(waiterToken);
    expect(Number(await client.zscore(`fq:{${key}}:w`, waiterToken))).toBeGreaterThan(await serverMs());
  }

  /** Every way a newcomer can ask without waiting: all of them must leave the key to the queued waiter. */
  async function expectNewcomerTurnedAway(newcomer: LockService, key: string): Promise<void> {
    const taken = await calls.track('newcomer tryAcquire', newcomer.tryAcquire(key));
    expect(taken && `the newcomer took the key (fence ${taken.fencingToken}) ahead of the queued waiter`).toBeNull();
    const busy = await calls.track('newcomer throw', newcomer.acquire(key, { onBusy: 'throw' })).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(LockBusyError);
    // -1: free, but promised to a queued waiter.
    expect((busy as LockBusyError).holderTtl).toBe(-1);
    expect(await calls.track('newcomer fail-fast', newcomer.acquire(key, { onBusy: 'fail-fast' }))).toBeNull();
    expect(await client.exists(`fq:{${key}}`)).toBe(0);
  }

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

  it('a holder killed with -9 while a live waiter is slow to wake: the lapsed key waits for that waiter, a newcomer is turned away', async () => {
    const monitor = await startMonitor(redis);
    try {
      await killedHolderCase(monitor.seen);
    } finally {
      monitor.stop();
    }
  });

  async function killedHolderCase(seen: readonly Seen[]): Promise<void> {
    const HOLDER_TTL = 800;
    const WAITER_TTL = 500;
    const holder = startWorker(HOLDER, { env: { REDIS_URL: redis.url, KEY: 'killed', KEY_PREFIX: 'fq:', TTL: String(HOLDER_TTL) } });
    workers.push(holder);
    const holderGot = await holder.waitFor((l) => l.event === 'acquired', 10_000);
    // The waiter is a process too, so it can be stopped (a GC pause, a starved CPU) while its place stays live.
    const waiter = startWorker(HOLDER, {
      env: {
        REDIS_URL: redis.url,
        KEY: 'killed',
        KEY_PREFIX: 'fq:',
        TTL: String(WAITER_TTL),
        WAITER_LEASE: String(SLOW_REFRESH_LEASE),
        WAIT_TIMEOUT: '30000',
      },
    });
    workers.push(waiter);
    await waiter.waitFor((l) => l.event === 'ready', 10_000);
    expect(await pollUntil(async () => (await client.llen('fq:{killed}:q')) === 1, 2_000, 1)).toBe(true);
    const [waiterToken] = await queueOf('killed');
    // A holder that is alive when its lease ends gives the key to the queue itself (it abandons the
    // lease on noticing), and a waiter at the head wakes when the holder's lease would end: a key sits
    // free with a live waiter queued only when the holder died and the waiter is slow to look. So:
    // stop the waiter before the holder's lease could end (it would wake for that), then kill the holder.
    // Not in the middle of an attempt, though (a grant answered after a long stop is refused as too
    // late): at its first wait the waiter subscribes and asks once more at once, then sleeps.
    const askedAgain = (c: Seen) => c.args.includes(waiterToken) && c.args[c.args.length - 1] === '1';
    expect(await pollUntil(() => seen.some(askedAgain), 2_000, 1)).toBe(true);
    waiter.pause();
    expect(await pollUntil(() => procState(waiter.pid) === 'T', 1_000, 1)).toBe(true);
    // Nothing was granted to the waiter before it stopped: the key is still the holder's.
    expect(await client.get('fq:{killed}')).toBe(holderGot.token);
    expect((await holder.kill9()).signal).toBe('SIGKILL');
    expect(isAlive(holder.pid)).toBe(false);
    expect(waiter.lines.some((l) => l.event === 'acquired')).toBe(false);
    // Nobody releases: the key lapses by the dead holder's TTL.
    expect(await pollUntil(async () => (await client.exists('fq:{killed}')) === 0, HOLDER_TTL + 500, 2)).toBe(true);

    await expectFreeAndPromised('killed', waiterToken);
    const newcomer = await makeService();
    await expectNewcomerTurnedAway(newcomer, 'killed');
    let newcomerAt = 0;
    const later = calls.track(
      'waiting newcomer',
      newcomer.acquire('killed').then((lock) => {
        newcomerAt = performance.now();
        return lock;
      }),
    );
    expect(await queueLength('killed', 2)).toBe(true);
    expect(procState(waiter.pid)).toBe('T');

    waiter.resume();
    const got = await waiter.waitFor((l) => l.event === 'acquired', 5_000);
    expect(got.token).toBe(waiterToken);
    expect(newcomerAt).toBe(0);
    // The waiter holds (its watchdog renews) until it dies too; then the newcomer, next in the queue, gets the key.
    expect(await client.get('fq:{killed}')).toBe(waiterToken);
    expect((await waiter.kill9()).signal).toBe('SIGKILL');
    const lock = await later;
    console.log(
      `killed holder: the stopped waiter took the key on resume (fence ${got.fence}); the newcomer got it after the waiter died (fence ${lock.fencingToken})`,
    );
    expect(lock.fencingToken).toBeGreaterThan(got.fence);
    expect(await lock.release()).toBe(true);
  }

  it('a minHold release lets the key run out unannounced: it still goes to the queued waiter, not to a newcomer', async () => {
    const MIN_HOLD = 300;
    const holder = await makeService();
    const waiter = await subscribedService({ waiterLease: SLOW_REFRESH_LEASE });
    const newcomer = await makeService();
    const held = await holder.acquire('cron', { minHold: MIN_HOLD });
    const events: string[] = [];
    const waiting = calls.track(
      'queued waiter',
      waiter.acquire('cron').then(async (lock) => {
        events.push('waiter acquired');
        await sleep(50);
        events.push('waiter releases');
        expect(await lock.release()).toBe(true);
        return lock;
      }),
    );
    expect(await queueLength('cron', 1)).toBe(true);
    const [waiterToken] = await queueOf('cron');
    // Done early: the key is kept until minHold has passed (shortened, not handed over), then lapses;
    // the waiter was told ~5 s were left and sleeps until its place is due for a refresh (≥ 800 ms).
    expect(await held.release()).toBe(true);
    expect(await client.get('fq:{cron}')).toBe(held.token);
    expect(await pollUntil(async () => (await client.exists('fq:{cron}')) === 0, MIN_HOLD + 500, 2)).toBe(true);

    await expectFreeAndPromised('cron', waiterToken);
    await expectNewcomerTurnedAway(newcomer, 'cron');
    expect(events).toEqual([]);
    const later = calls.track(
      'waiting newcomer',
      newcomer.acquire('cron').then((lock) => {
        events.push('newcomer acquired');
        return lock;
      }),
    );
    const waiterLock = await waiting;
    const newcomerLock = await later;
    console.log(`minHold release: ${events.join(' -> ')}`);
    expect(waiterLock.token).toBe(waiterToken);
    expect(events).toEqual(['waiter acquired', 'waiter releases', 'newcomer acquired']);
    expect(newcomerLock.fencingToken).toBeGreaterThan(waiterLock.fencingToken);
    expect(waiterLock.fencingToken).toBeGreaterThan(held.fencingToken);
    expect(await newcomerLock.release()).toBe(true);
  });
});
