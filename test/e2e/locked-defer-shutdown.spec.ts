/**
 * Shutdown with deferred work in flight, on a real Redis with real BullMQ: `app.close()` while a deferred
 * job runs. The worker stops taking jobs, the running job is told through its lock's signal (as direct calls
 * are by LockService.close()) and finishes under its lock before the lock service and any Redis connection
 * close, bounded by shutdownTimeout; a job not started, or still waiting for its lock, stays (or goes back) in the
 * queue and another instance runs it. From the drain on (the lock module's onModuleDestroy), a call is refused as after
 * close() (LockServiceClosedError, 503 over HTTP): it neither runs here nor is enqueued.
 */
import { INestApplication, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { setTimeout as sleepAbortable } from 'node:timers/promises';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockLostError, LockService, LockServiceClosedError, Locked, currentLock } from '../../lib';
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

/** Runs of `Reindex.failsOnce` so far. */
let failsOnceRuns = 0;
/** Runs of `Reindex.abortable` so far: only the first works until told to stop. */
let abortableRuns = 0;
/** Runs of `Reindex.nested` so far: only the first waits for the shutdown. */
let nestedRuns = 0;
/** Runs of `Reindex.stubborn` so far: only the first ignores the shutdown. */
let stubbornRuns = 0;
/** How long the first `stubborn` run goes on, whatever it is told. */
const STUBBORN_MS = 4_000;

@Injectable()
class Reindex {
  /** Long work written as the docs ask: it goes on until its lock's signal aborts (20 s at most). */
  @Locked('reindex:<0>', { onBusy: 'defer' })
  async cooperative(id: string): Promise<string | Deferred> {
    const lock = currentLock()!;
    events.push(`start ${id}`);
    const reason = await new Promise<unknown>((resolve) => {
      const timer = setTimeout(() => resolve('no signal within 20 s'), 20_000);
      lock.signal.addEventListener('abort', () => (clearTimeout(timer), resolve(lock.signal.reason)), { once: true });
    });
    const told = reason instanceof LockLostError ? `LockLostError ${reason.reason}` : String(reason);
    events.push(`stop ${id} (${told}, held ${lock.isHeld()})`);
    return id;
  }

  /** Its first run ignores the signal and goes on for STUBBORN_MS; later runs return at once. */
  @Locked('reindex:<0>', { onBusy: 'defer', ttl: 1_000 })
  async stubborn(id: string): Promise<string | Deferred> {
    const run = ++stubbornRuns;
    const lock = currentLock()!;
    events.push(`start ${id} run ${run} token ${lock.fencingToken}`);
    if (run === 1) await sleep(STUBBORN_MS);
    events.push(`end ${id} run ${run}`);
    return id;
  }

  /**
   * Works until told to stop, and stops by throwing (`timers/promises` rejects with an AbortError whose cause is the
   * signal's reason, or `throwIfAborted()` throws the reason itself); a run not told returns at once.
   */
  @Locked('reindex:<0>', { onBusy: 'defer' })
  async abortable(id: string, how: 'timers' | 'throwIfAborted'): Promise<string | Deferred> {
    const lock = currentLock()!;
    events.push(`start ${id}`);
    if (abortableRuns++ > 0) return id;
    if (how === 'timers') await sleepAbortable(20_000, undefined, { signal: lock.signal });
    else await new Promise<void>((resolve) => lock.signal.addEventListener('abort', () => resolve(), { once: true }));
    lock.signal.throwIfAborted();
    return id;
  }

  /**
   * Its first run goes on when told to stop and then, as real code does, takes a lock on another key (a nested
   * `@Locked`), which the shutdown refuses: it lets that error out as is, wrapped in its own error (`cause`), or
   * fails of its own ('own error': the work's own failure, which the shutdown does not excuse). Later runs do
   * the nested call at once.
   */
  @Locked('reindex:<0>', { onBusy: 'defer' })
  async nested(id: string, how: 'as is' | 'wrapped' | 'own error'): Promise<string | Deferred> {
    const lock = currentLock()!;
    events.push(`start ${id}`);
    if (nestedRuns++ === 0) {
      await new Promise<void>((resolve) => lock.signal.addEventListener('abort', () => resolve(), { once: true }));
      await sleep(50); // some work after the notice, then the nested call
      if (how === 'own error') throw new Error('the export file is corrupt');
    }
    try {
      await this.reserveStock(id);
    } catch (error) {
      events.push(`refused ${id} (${(error as Error).name})`);
      throw how === 'wrapped' ? new Error(`reindex ${id} failed`, { cause: error }) : error;
    }
    return id;
  }

  @Locked('stock:<0>')
  async reserveStock(id: string): Promise<void> {
    events.push(`stock ${id}`);
  }

  /** Throws on its first run, returns on the next. */
  @Locked('reindex:<0>', { onBusy: 'defer' })
  async failsOnce(id: string): Promise<string | Deferred> {
    events.push(`start ${id}`);
    if (failsOnceRuns++ === 0) throw new Error('transient');
    return id;
  }

  /** Run by a worker whose module waits up to 20 s for a lock (a deferring call itself does not wait). */
  @Locked('reindex:<0>', { onBusy: 'defer' })
  async patient(id: string): Promise<string | Deferred> {
    events.push(`ran ${id}`);
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
    const { closeWorker } = coordinator;
    locks.close = () => {
      events.push('lock service closes');
      return close.call(locks);
    };
    coordinator.closeWorker = () => {
      events.push('defer worker drains');
      return closeWorker.call(coordinator);
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
      // While the worker drains, no new lock is taken: a free key does not run here, a busy key (job a holds
      // drain:a) is not enqueued; both are refused as calls after close() are.
      const refused = (call: Promise<unknown>) => call.catch((error: unknown) => error);
      const [busy, free] = await Promise.all([refused(a.slow.run('a')), refused(a.slow.run('free'))]);
      duringDrain = { busy, free };
      await closed;
    } finally {
      restore();
    }
    apps.splice(apps.indexOf(a.app), 1);

    // Told to stop (signal aborted, reason 'shutdown'), it finished under its lock, still held.
    const endA = events.indexOf('end a (signal aborted, held true)');
    expect(endA).toBeGreaterThan(events.indexOf('defer worker drains'));
    const closing = events.filter((e) => e.startsWith('redis closes') || e === 'lock service closes');
    expect(closing).toEqual(expect.arrayContaining(['lock service closes', 'redis closes (lock service)', 'redis closes (bullmq)']));
    // Nothing closed before the running job ended: every close comes after it.
    expect(events.slice(0, endA).filter((e) => closing.includes(e))).toEqual([]);
    expect(events).not.toContain('start b');
    expect(duringDrain.free).toBeInstanceOf(LockServiceClosedError);
    expect(duringDrain.busy).toBeInstanceOf(LockServiceClosedError);
    expect(events).not.toContain('start free');

    // In BullMQ: job a completed with its result; job b waits.
    const first = (await queue.getJob((jobA as Deferred).jobId))!;
    expect(await first.getState()).toBe('completed');
    expect(first.returnvalue).toBe('a');
    const waiting = [(jobB as Deferred).jobId];
    expect(await Promise.all(waiting.map((id) => queue.getJobState(id)))).toEqual(['waiting']);

    // Another instance picks them up: no job was lost.
    await instance();
    expect(
      await pollUntil(async () => (await Promise.all(waiting.map((id) => queue.getJobState(id)))).every((s) => s === 'completed'), 20_000, 25),
    ).toBe(true);
    expect(events.filter((e) => e.startsWith('end b'))).toEqual(['end b (signal live, held true)']);
    expect(events.filter((e) => e.startsWith('end a'))).toHaveLength(1);
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

describe("onBusy 'defer': app.close() is bounded by shutdownTimeout while deferred jobs run or wait", () => {
  const SHUTDOWN_TIMEOUT = 1_000;
  let redis: RedisProcess;
  const apps: INestApplication[] = [];
  let queue: Queue | undefined;
  let queueName = '';
  let testNo = 0;

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });
  afterAll(() => redis.stop());
  beforeEach(() => {
    events.length = 0;
    queueName = `defer-bounded-${++testNo}`;
    queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
  });
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
    await queue?.close();
  });

  async function instance(
    worker = true,
    waitTimeout = 5_000,
    attempts?: number,
  ): Promise<{ app: INestApplication; reindex: Reindex; locks: LockService }> {
    @Module({
      imports: [
        DistributedLockModule.forRoot({
          redis: redis.url,
          keyPrefix: 'defer-bounded:',
          shutdownTimeout: SHUTDOWN_TIMEOUT,
          waitTimeout,
          defer: { queueName, worker, jobLease: 1_000, backoff: 50, attempts },
        }),
      ],
      providers: [Reindex],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: ['error'] });
    await app.init();
    apps.push(app);
    return { app, reindex: app.get(Reindex), locks: app.get(LockService) };
  }

  /** Defers `call` on instance `a` (its key held meanwhile by `holder`) and returns its job id. */
  async function deferred(holder: LockService, key: string, call: () => Promise<unknown>): Promise<string> {
    const held = await holder.acquire(key);
    const answer = await call();
    await held.release();
    expect(answer).toBeInstanceOf(Deferred);
    return (answer as Deferred).jobId;
  }

  /** How long `app.close()` took, or 'still closing' after `ms`. */
  async function timeClose(app: INestApplication, ms: number): Promise<number | 'still closing'> {
    const startedAt = Date.now();
    apps.splice(apps.indexOf(app), 1);
    const closed = app.close().then(() => Date.now() - startedAt);
    return Promise.race([closed, sleep(ms).then(() => 'still closing' as const)]);
  }

  it('a job that works until its signal aborts is told at shutdown (LockLostError, reason shutdown) and the close ends at once', async () => {
    const a = await instance();
    const jobId = await deferred(a.locks, 'reindex:c1', () => a.reindex.cooperative('c1'));
    expect(await pollUntil(() => events.includes('start c1'), 10_000, 5)).toBe(true);
    const took = await timeClose(a.app, 8_000);
    expect(took).toBeLessThan(SHUTDOWN_TIMEOUT);
    expect(events).toContain('stop c1 (LockLostError shutdown, held true)');
    const job = (await queue!.getJob(jobId))!;
    expect(await job.getState()).toBe('completed');
    expect(job.returnvalue).toBe('c1');
  }, 30_000);

  it.each(['timers', 'throwIfAborted'] as const)(
    'a job that stops by throwing its shutdown notice (%s) goes back to the queue with no attempt used, and another instance runs it (attempts: 1)',
    async (how) => {
      abortableRuns = 0;
      const a = await instance(true, 5_000, 1);
      const jobId = await deferred(a.locks, `reindex:t-${how}`, () => a.reindex.abortable(`t-${how}`, how));
      expect(await pollUntil(() => events.includes(`start t-${how}`), 10_000, 5)).toBe(true);
      const took = await timeClose(a.app, 8_000);
      expect(took).toBeLessThan(SHUTDOWN_TIMEOUT);
      const job = (await queue!.getJob(jobId))!;
      // Before: failed for good (attempts: 1), 'LockLostError: … shutting down', and never run again.
      expect(['waiting', 'delayed']).toContain(await job.getState());
      expect(job.attemptsMade).toBe(0);

      await instance(true, 5_000, 1); // the same attempts: the stopped run used none of them
      expect(await pollUntil(async () => (await queue!.getJobState(jobId)) === 'completed', 15_000, 25)).toBe(true);
      expect(events.filter((e) => e === `start t-${how}`)).toHaveLength(2);
    },
    40_000,
  );

  it.each(['as is', 'wrapped'] as const)(
    'a job whose nested lock call is refused by the shutdown (LockServiceClosedError, %s) goes back to the queue with no attempt used, and another instance runs it (attempts: 1)',
    async (how) => {
      nestedRuns = 0;
      const id = `n-${how.replace(' ', '-')}`;
      const a = await instance(true, 5_000, 1);
      const jobId = await deferred(a.locks, `reindex:${id}`, () => a.reindex.nested(id, how));
      expect(await pollUntil(() => events.includes(`start ${id}`), 10_000, 5)).toBe(true);
      const took = await timeClose(a.app, 8_000);
      expect(took).toBeLessThan(SHUTDOWN_TIMEOUT);
      expect(events).toContain(`refused ${id} (LockServiceClosedError)`);
      const job = (await queue!.getJob(jobId))!;
      // Before: failed for good (attempts: 1), 'LockServiceClosedError: … lock "stock:…" was not acquired', never run again.
      expect(['waiting', 'delayed']).toContain(await job.getState());
      expect(job.attemptsMade).toBe(0);

      await instance(true, 5_000, 1); // the same attempts: the stopped run used none of them
      expect(await pollUntil(async () => (await queue!.getJobState(jobId)) === 'completed', 15_000, 25)).toBe(true);
      expect(events.filter((e) => e === `stock ${id}`)).toHaveLength(1);
    },
    40_000,
  );

  it('a job that fails of its own during the shutdown uses its attempt as any failure does: the shutdown excuses only what it caused (attempts: 1)', async () => {
    nestedRuns = 0;
    const a = await instance(true, 5_000, 1);
    const jobId = await deferred(a.locks, 'reindex:n-own', () => a.reindex.nested('n-own', 'own error'));
    expect(await pollUntil(() => events.includes('start n-own'), 10_000, 5)).toBe(true);
    expect(await timeClose(a.app, 8_000)).toBeLessThan(SHUTDOWN_TIMEOUT);
    const job = (await queue!.getJob(jobId))!;
    expect(await job.getState()).toBe('failed');
    expect(job.failedReason).toBe('Error: the export file is corrupt');
  }, 30_000);

  it("a job failed for good and retried by hand (a dashboard's job.retry()) runs again (attempts: 1)", async () => {
    failsOnceRuns = 0;
    const a = await instance(true, 5_000, 1);
    const jobId = await deferred(a.locks, 'reindex:r1', () => a.reindex.failsOnce('r1'));
    expect(await pollUntil(async () => (await queue!.getJobState(jobId)) === 'failed', 10_000, 10)).toBe(true);
    await sleep(200); // the worker's 'failed' handler has run
    await (await queue!.getJob(jobId))!.retry('failed');
    // Before: failed again at once without running ('started 1 time(s) already … not run again').
    expect(await pollUntil(async () => (await queue!.getJobState(jobId)) === 'completed', 10_000, 10)).toBe(true);
    expect(events.filter((e) => e === 'start r1')).toHaveLength(2);
  }, 30_000);

  it('a job that ignores its signal: the close ends within about twice shutdownTimeout, and another instance runs the job again once its first lock lapsed', async () => {
    stubbornRuns = 0;
    const a = await instance();
    const jobId = await deferred(a.locks, 'reindex:s1', () => a.reindex.stubborn('s1'));
    expect(await pollUntil(() => events.some((e) => e.startsWith('start s1 run 1')), 10_000, 5)).toBe(true);
    const took = await timeClose(a.app, 8_000);
    // Worker drain, then the lock service's own drain: each bounded by shutdownTimeout.
    expect(took).toBeLessThan(2 * SHUTDOWN_TIMEOUT + 1_500);
    expect(events).not.toContain('end s1 run 1'); // still running: the close did not wait for it

    await instance(); // another instance: runs the job again once its BullMQ lease lapsed
    expect(await pollUntil(async () => (await queue!.getJobState(jobId)) === 'completed', 15_000, 25)).toBe(true);
    const starts = events.filter((e) => e.startsWith('start s1'));
    expect(starts).toHaveLength(2);
    const [first, second] = starts.map((e) => Number(/token (\d+)/.exec(e)![1]));
    expect(second).toBeGreaterThan(first); // the re-run got the key only after the first lease lapsed
    // The first run goes on to its end (no timer of it left behind).
    expect(await pollUntil(() => events.includes('end s1 run 1'), 10_000, 25)).toBe(true);
  }, 40_000);

  it('a job still waiting for its lock leaves at once: back in the queue with no attempt used, and run by another instance', async () => {
    const other = await instance(false);
    const a = await instance(true, 20_000);
    const held = await other.locks.acquire('reindex:p1'); // held by another instance all along
    const answer = await a.reindex.patient('p1');
    expect(answer).toBeInstanceOf(Deferred);
    const jobId = (answer as Deferred).jobId;
    expect(await pollUntil(async () => (await queue!.getJobState(jobId)) === 'active', 10_000, 10)).toBe(true);
    await sleep(100); // a's worker waits for the lock
    const took = await timeClose(a.app, 8_000);
    expect(took).toBeLessThan(SHUTDOWN_TIMEOUT);
    const job = (await queue!.getJob(jobId))!;
    // Back in the queue, due now: delayed by 0 ms (promoted to waiting by the next worker that looks).
    expect(['waiting', 'delayed']).toContain(await job.getState());
    expect(job.delay).toBe(0);
    expect(job.attemptsMade).toBe(0);
    expect(events).not.toContain('ran p1');

    await held.release();
    await instance();
    expect(await pollUntil(async () => (await queue!.getJobState(jobId)) === 'completed', 15_000, 25)).toBe(true);
    expect(events.filter((e) => e === 'ran p1')).toHaveLength(1);
  }, 40_000);
});
