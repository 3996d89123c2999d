/**
 * onBusy 'defer' when Redis goes away (kill -9, SIGSTOP) on a real Redis with real BullMQ: a call whose key
 * was busy and whose enqueue cannot reach Redis answers LockConnectionError (503 over HTTP) within
 * commandTimeout instead of waiting for Redis to come back, and is not enqueued behind the caller's back
 * once it does; app.close() ends within its bounds with Redis gone, a deferred job running or not; a startup
 * that fails on an unreachable Redis leaves no queue connection reconnecting behind it.
 */
import * as net from 'node:net';
import { INestApplication, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockConnectionError, LockService, Locked } from '../../lib';
import { RedisProcess } from '../harness/redis-process';
import { Logger } from '@nestjs/common';
import { BullmqDeferQueue } from '../../lib/defer/bullmq-defer-queue';
import type { DeferTarget } from '../../lib/defer/defer-target';
import { createLockMetrics } from '../../lib/observability/otel-lock-metrics';
import { pollUntil, sleep } from '../unit/core-helpers';

const COMMAND_TIMEOUT = 500;
const SHUTDOWN_TIMEOUT = 1_000;
const events: string[] = [];

@Injectable()
class Work {
  @Locked('work:<0>', { onBusy: 'defer' })
  async run(id: string): Promise<string | Deferred> {
    events.push(`start ${id}`);
    await sleep(1_500);
    events.push(`end ${id}`);
    return id;
  }
}

/** A promise's outcome, or 'pending' after `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<{ value?: unknown; error?: unknown; ms: number } | 'pending'> {
  const startedAt = Date.now();
  const outcome = promise.then(
    (value) => ({ value, ms: Date.now() - startedAt }),
    (error: unknown) => ({ error, ms: Date.now() - startedAt }),
  );
  return Promise.race([outcome, sleep(ms).then(() => 'pending' as const)]);
}

describe("onBusy 'defer' with Redis gone", () => {
  let redis: RedisProcess;
  let queueName = '';
  let testNo = 0;
  const apps: INestApplication[] = [];
  let restoreAdd: (() => void) | undefined;

  beforeEach(async () => {
    events.length = 0;
    queueName = `defer-down-${++testNo}`;
    redis = await RedisProcess.start();
  });
  afterEach(async () => {
    restoreAdd?.();
    restoreAdd = undefined;
    for (const app of apps.splice(0)) await app.close();
    await redis.stop();
  });

  async function instance(worker: boolean): Promise<{ app: INestApplication; work: Work; locks: LockService }> {
    @Module({
      imports: [
        DistributedLockModule.forRoot({
          redis: redis.url,
          keyPrefix: 'defer-down:',
          commandTimeout: COMMAND_TIMEOUT,
          shutdownTimeout: SHUTDOWN_TIMEOUT,
          defer: { queueName, worker },
        }),
      ],
      providers: [Work],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: ['error'] });
    await app.init();
    apps.push(app);
    return { app, work: app.get(Work), locks: app.get(LockService) };
  }

  /** The next enqueue first runs `fault` (Redis dies or freezes after the lock attempt answered "busy"). */
  function beforeNextEnqueue(fault: () => Promise<unknown> | void): void {
    const add = jest.spyOn(Queue.prototype, 'add');
    const original = add.getMockImplementation() ?? (Queue.prototype.add as (...a: unknown[]) => Promise<unknown>);
    restoreAdd = () => add.mockRestore();
    add.mockImplementationOnce(async function (this: Queue, ...args: Parameters<Queue['add']>) {
      await fault();
      return (original as (...a: unknown[]) => ReturnType<Queue['add']>).apply(this, args);
    });
  }

  const closeOf = (app: INestApplication) => {
    apps.splice(apps.indexOf(app), 1);
    return app.close();
  };

  it('Redis killed between the busy answer and the enqueue: LockConnectionError at once, no job when Redis is back, app.close() bounded', async () => {
    const other = await instance(false);
    const a = await instance(false);
    const held = await other.locks.acquire('work:1');
    beforeNextEnqueue(() => redis.kill9());
    const call = await within(a.work.run('1'), 5_000);
    expect(call).not.toBe('pending');
    const { error, ms } = call as { error: unknown; ms: number };
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as LockConnectionError).operation).toBe('enqueue');
    expect((error as Error).message).toMatch(/enqueue of Work\.run failed .*not run here/);
    expect(ms).toBeLessThan(COMMAND_TIMEOUT + 500);

    const closed = await within(closeOf(a.app), 8_000);
    expect(closed).not.toBe('pending');
    expect((closed as { ms: number }).ms).toBeLessThan(SHUTDOWN_TIMEOUT + 2 * COMMAND_TIMEOUT + 500);

    await redis.restart();
    const queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
    try {
      await sleep(1_500); // the other connections reconnect: a replayed enqueue would land now
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
      expect(Object.values(c).reduce((a, b) => a + b, 0)).toBe(0);
    } finally {
      await queue.close();
    }
    await held.release().catch(() => false); // its key went with the killed Redis
    expect(events).toEqual([]);
  }, 40_000);

  it('Redis frozen (SIGSTOP) during the enqueue: LockConnectionError after commandTimeout saying the outcome is unknown', async () => {
    const other = await instance(false);
    const a = await instance(false);
    const held = await other.locks.acquire('work:2');
    beforeNextEnqueue(() => redis.pause());
    let call: Awaited<ReturnType<typeof within>>;
    try {
      call = await within(a.work.run('2'), 5_000);
    } finally {
      redis.resume();
    }
    expect(call).not.toBe('pending');
    const { error, ms } = call as { error: unknown; ms: number };
    expect(error).toBeInstanceOf(LockConnectionError);
    expect((error as Error).message).toMatch(/did not answer the enqueue of Work\.run within 500 ms.*unknown/);
    expect(ms).toBeGreaterThanOrEqual(COMMAND_TIMEOUT - 5);
    expect(ms).toBeLessThan(COMMAND_TIMEOUT + 500);
    await held.release();
  }, 30_000);

  it('an enqueue while the queue has no connection is not sent: LockConnectionError, and nothing lands when Redis is back', async () => {
    await redis.kill9();
    const options = { queueName, concurrency: 1, worker: false, attempts: 1, backoff: 1_000, jobLease: 30_000 };
    const queue = new BullmqDeferQueue(
      options,
      redis.url,
      { commandTimeout: COMMAND_TIMEOUT, shutdownTimeout: SHUTDOWN_TIMEOUT },
      createLockMetrics(() => undefined),
      new Logger('test'),
    );
    const method = { name: 'Work.run', where: '@Locked on Work.run', lockOptions: {} };
    const target = { name: 'Work.run', instance: {}, method } as unknown as DeferTarget;
    try {
      const started = performance.now();
      const error = await queue.enqueue(target, ['9']).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockConnectionError);
      expect((error as Error).message).toMatch(/enqueue of Work\.run failed .*nothing was sent/);
      expect(performance.now() - started).toBeLessThan(COMMAND_TIMEOUT + 500);
      await redis.restart();
      // BullMQ held the add until its connection was ready: before, it landed now, after the caller was told it failed.
      await sleep(1_500);
      const check = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
      try {
        const counts = await check.getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed');
        expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(0);
      } finally {
        await check.close();
      }
    } finally {
      await queue.close();
    }
  }, 30_000);

  it('Redis killed while a deferred job runs: app.close() ends within its bounds', async () => {
    const other = await instance(false);
    const a = await instance(true);
    const held = await other.locks.acquire('work:3');
    expect(await a.work.run('3')).toBeInstanceOf(Deferred);
    await held.release();
    expect(await pollUntil(() => events.includes('start 3'), 10_000, 5)).toBe(true);
    await redis.kill9();
    const closed = await within(closeOf(a.app), 15_000);
    expect(closed).not.toBe('pending');
    // The worker's and the lock service's drains run side by side (shutdownTimeout), then the connections close
    // (at most commandTimeout each). The job runs 1.5 s, past shutdownTimeout: close() does not wait for it beyond
    // that, and it goes on to its end (its BullMQ lease lapses for another instance to run it again).
    expect((closed as { ms: number }).ms).toBeLessThan(SHUTDOWN_TIMEOUT + 4 * COMMAND_TIMEOUT + 1_000);
    expect(await pollUntil(() => events.includes('end 3'), 3_000, 10)).toBe(true);
    expect(events).toEqual(['start 3', 'end 3']);
  }, 40_000);

  it('Redis unreachable at startup: init fails with LockConnectionError and the queue stops connecting too (nothing retries in a process that did not start)', async () => {
    // A port that accepts and drops every connection: each reconnect attempt of any client is counted.
    let attempts = 0;
    const server = net.createServer((socket) => {
      attempts++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    try {
      @Module({
        imports: [
          DistributedLockModule.forRoot({
            redis: `redis://127.0.0.1:${port}`,
            startupTimeout: 1_000,
            commandTimeout: COMMAND_TIMEOUT,
            shutdownTimeout: SHUTDOWN_TIMEOUT,
            defer: { queueName },
          }),
        ],
        providers: [Work],
      })
      class AppModule {}
      const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
      const app = moduleRef.createNestApplication({ logger: false });
      await expect(app.init()).rejects.toBeInstanceOf(LockConnectionError);
      expect(attempts).toBeGreaterThan(0); // the fault: every client really was turned away
      // The queue closes within its bounds (shutdownTimeout, then commandTimeout for its connections).
      await sleep(SHUTDOWN_TIMEOUT + COMMAND_TIMEOUT + 500);
      const before = attempts;
      await sleep(2_500);
      // Before: BullMQ's connection kept reconnecting (about 2 attempts a second) and kept the process alive.
      expect(attempts - before).toBe(0);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 30_000);
});
