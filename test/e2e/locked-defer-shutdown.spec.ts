/**
 * Shutdown with deferred work in flight, on a real Redis with real BullMQ: `app.close()` while a deferred
 * job runs. The worker stops taking jobs, the running job finishes under its lock (its signal not aborted)
 * before the lock service and any Redis connection close; a job not started stays waiting in the queue and
 * another instance runs it. Calls made during the drain still work: a free key runs here, a busy one is
 * enqueued for another instance.
 */
import { INestApplication, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockService, LockServiceClosedError, Locked, currentLock } from '../../lib';
import { LockDeferCoordinator } from '../../lib/lock-defer.coordinator';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil, sleep } from '../unit/core-helpers';

const QUEUE = 'defer-shutdown';
/** How long a deferred run takes: long enough to close the application in the middle of it. */
const JOB_MS = 2_000;

/** What happened, in order, across both instances (they share this process). */
const events: string[] = [];

@Injectable()
class Slow {
  @Locked('drain:<0>', { onBusy: 'defer' })
  async run(id: string): Promise<string | Deferred> {
    const lock = currentLock()!;
    events.push(`start ${id}`);
    await sleep(JOB_MS);
    events.push(`end ${id} (signal ${lock.signal.aborted ? 'aborted' : 'live'}, held ${lock.isHeld()})`);
    return id;
  }
}

describe("onBusy 'defer': app.close() while a deferred job runs", () => {
  let redis: RedisProcess;
  const apps: INestApplication[] = [];
  let queue: Queue;

  beforeAll(async () => {
    redis = await RedisProcess.start();
    queue = new Queue(QUEUE, { connection: { host: redis.host, port: redis.port } });
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await queue.close();
    await redis.stop();
  });

  async function instance(): Promise<{ app: INestApplication; slow: Slow; locks: LockService }> {
    @Module({
      imports: [DistributedLockModule.forRoot({ redis: redis.url, keyPrefix: 'defer-shutdown:', defer: { queueName: QUEUE, concurrency: 1 } })],
      providers: [Slow],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: ['error'] });
    await app.init();
    apps.push(app);
    return { app, slow: app.get(Slow), locks: app.get(LockService) };
  }

  /** Records (in `events`) every Redis connection closed and the lock service closing, until restored. */
  function recordClosing(locks: LockService, coordinator: LockDeferCoordinator): () => void {
    const kind = (client: Redis) => (client.options.maxRetriesPerRequest === null ? 'bullmq' : 'lock service');
    const { quit, disconnect } = Redis.prototype;
    const spies = [
      jest.spyOn(Redis.prototype, 'quit').mockImplementation(function (this: Redis, ...args: unknown[]) {
        events.push(`redis closes (${kind(this)})`);
        return (quit as (...a: unknown[]) => Promise<'OK'>).apply(this, args);
      }),
      jest.spyOn(Redis.prototype, 'disconnect').mockImplementation(function (this: Redis, ...args: unknown[]) {
        events.push(`redis closes (${kind(this)})`);
        return (disconnect as (...a: unknown[]) => void).apply(this, args);
      }),
    ];
    const { close } = locks;
    const { beforeApplicationShutdown } = coordinator;
    locks.close = () => {
      events.push('lock service closes');
      return close.call(locks);
    };
    coordinator.beforeApplicationShutdown = () => {
      events.push('defer worker drains');
      return beforeApplicationShutdown.call(coordinator);
    };
    return () => spies.forEach((s) => s.mockRestore());
  }

  it('the running job finishes under its lock before anything closes; a job not started waits for another instance', async () => {
    const a = await instance();
    // Two deferred jobs: both keys busy when called.
    const holdA = await a.locks.acquire('drain:a');
    const holdB = await a.locks.acquire('drain:b');
    const jobA = await a.slow.run('a');
    const jobB = await a.slow.run('b');
    expect(jobA).toBeInstanceOf(Deferred);
    expect(jobB).toBeInstanceOf(Deferred);
    await holdA.release();
    expect(await pollUntil(() => events.includes('start a'), 10_000, 5)).toBe(true);
    await holdB.release(); // job b is free to run, but this instance's one worker slot is taken by job a

    const restore = recordClosing(a.locks, a.app.get(LockDeferCoordinator, { strict: false }));
    let closed: Promise<void>;
    let duringDrain: { busy: unknown; free: unknown };
    try {
      closed = a.app.close();
      expect(await pollUntil(() => events.includes('defer worker drains'), 5_000, 1)).toBe(true);
      // While the worker drains, the application still serves: a free key runs here, a busy key
      // (job a holds drain:a) is enqueued for another instance.
      const [busy, free] = await Promise.all([a.slow.run('a'), a.slow.run('free')]);
      duringDrain = { busy, free };
      await closed;
    } finally {
      restore();
    }
    apps.splice(apps.indexOf(a.app), 1);

    const endA = events.indexOf('end a (signal live, held true)');
    expect(endA).toBeGreaterThan(events.indexOf('defer worker drains'));
    const closing = events.filter((e) => e.startsWith('redis closes') || e === 'lock service closes');
    expect(closing).toEqual(expect.arrayContaining(['lock service closes', 'redis closes (lock service)', 'redis closes (bullmq)']));
    // Nothing closed before the running job ended: every close comes after it.
    expect(events.slice(0, endA).filter((e) => closing.includes(e))).toEqual([]);
    expect(events).not.toContain('start b');
    expect(duringDrain.free).toBe('free');
    expect(duringDrain.busy).toBeInstanceOf(Deferred);

    // In BullMQ: job a completed with its result; job b and the one deferred during the drain wait.
    const first = (await queue.getJob((jobA as Deferred).jobId))!;
    expect(await first.getState()).toBe('completed');
    expect(first.returnvalue).toBe('a');
    const waiting = [(jobB as Deferred).jobId, (duringDrain.busy as Deferred).jobId];
    expect(await Promise.all(waiting.map((id) => queue.getJobState(id)))).toEqual(['waiting', 'waiting']);

    // Another instance picks them up: no job was lost.
    await instance();
    expect(
      await pollUntil(async () => (await Promise.all(waiting.map((id) => queue.getJobState(id)))).every((s) => s === 'completed'), 20_000, 25),
    ).toBe(true);
    expect(events.filter((e) => e.startsWith('end b'))).toEqual(['end b (signal live, held true)']);
    expect(events.filter((e) => e.startsWith('end a'))).toHaveLength(2);
  }, 40_000);

  it('a busy call that reaches the queue after it closed (the race with shutdown) is refused like a call after close(): LockServiceClosedError', async () => {
    const c = await instance();
    const held = await c.locks.acquire('drain:z');
    const before = await queue.getJobCounts('waiting', 'delayed');
    // The moment the queue closes alongside the lock service, while this call's lock attempt is in flight.
    await c.app.get(LockDeferCoordinator, { strict: false }).onApplicationShutdown();
    const late = c.slow.run('z');
    await expect(late).rejects.toBeInstanceOf(LockServiceClosedError);
    await expect(late).rejects.toThrow(/"drain:z".*shutting down: the call was neither run nor deferred/);
    expect(await queue.getJobCounts('waiting', 'delayed')).toEqual(before); // nothing enqueued
    expect(events).not.toContain('start z');
    await held.release();
  });
});
