/**
 * `@Locked(…, { onBusy: 'defer' })` under the testing module: the answers production gives (docs/defer.md;
 * on BullMQ: test/e2e/locked-defer*.spec.ts), in process. A free key runs at once; a busy one answers
 * `Deferred` and the job runs here under the lock, first come first, retried with backoff, one job per
 * deferKey; LockTestingController lists and awaits the jobs; app.close() drains them within shutdownTimeout.
 */
import 'reflect-metadata';
import { Inject, Injectable, INestApplicationContext, Logger, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { UnrecoverableError } from 'bullmq';
import {
  currentLock,
  Deferred,
  DeferArgumentError,
  DistributedLockError,
  Locked,
  LockLostError,
  LockService,
  type DistributedLockModuleOptions,
} from '../../lib';
import { LOCK_METRIC_NAMES } from '../../lib/observability/otel-lock-metrics';
import { DistributedLockTestingModule, LockTestingController } from '../../lib/testing';
import { OtelCapture } from '../harness/otel-capture';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What the deferring methods saw, shared by the tests (reset before each). */
const seen: { calls: string[]; tokens: number[]; failuresLeft: number; outerFromJob: unknown[]; startedAt: number[] } = {
  calls: [],
  tokens: [],
  failuresLeft: 0,
  outerFromJob: [],
  startedAt: [],
};

@Injectable()
class Mailer {
  constructor(@Inject(LockService) readonly locks: LockService) {}

  @Locked('mail:<0>', { onBusy: 'defer' })
  async send(id: string, body: { text: string } = { text: '' }): Promise<string | Deferred> {
    seen.calls.push(`${id}:${body.text}`);
    seen.tokens.push(currentLock()!.fencingToken);
    seen.startedAt.push(performance.now());
    if (seen.failuresLeft > 0) {
      seen.failuresLeft--;
      throw new TypeError(`boom ${id}`);
    }
    return `sent ${id}:${body.text}`;
  }

  @Locked('mail:<0>', { onBusy: 'defer', deferKey: 'request:<1>' })
  async sendOnce(id: string, requestId: string, text: string): Promise<string | Deferred> {
    seen.calls.push(`${id}:${requestId}:${text}`);
    if (seen.failuresLeft > 0) {
      seen.failuresLeft--;
      throw new Error('not yet');
    }
    return text;
  }

  /** Waits up to 300 ms for a busy key before deferring (docs/defer.md). */
  @Locked('mail:<0>', { onBusy: 'defer', waitTimeout: 300 })
  async sendPatiently(id: string): Promise<string | Deferred> {
    seen.calls.push(`patient ${id}`);
    return `sent ${id}`;
  }

  /** Fails for good on its first run, as BullMQ reads an error named UnrecoverableError. */
  @Locked('mail:<0>', { onBusy: 'defer' })
  async charge(id: string): Promise<string | Deferred> {
    seen.calls.push(`charge ${id}`);
    throw new UnrecoverableError(`card ${id} declined for good`);
  }

  /** Runs (or is deferred) while its caller holds 'outer': a job must not count the caller's locks as its own. */
  @Locked('mail:<0>', { onBusy: 'defer' })
  async tryOuter(_id: string): Promise<boolean | Deferred> {
    const outer = await this.locks.tryAcquire('outer');
    seen.outerFromJob.push(outer === null ? 'busy' : 'taken');
    await outer?.release();
    return outer !== null;
  }

  /** Runs until told to stop (its lock's signal), or for `ms` when it ignores the signal. */
  @Locked('mail:<0>', { onBusy: 'defer' })
  async long(id: string, ms: number, obeySignal: boolean): Promise<string | Deferred> {
    seen.calls.push(`long ${id} started`);
    const signal = currentLock()!.signal;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      if (obeySignal) signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
    seen.calls.push(`long ${id} ended: ${signal.aborted ? (signal.reason as LockLostError).reason : 'not told'}`);
    return 'done';
  }
}

describe('onBusy defer in DistributedLockTestingModule', () => {
  const apps: INestApplicationContext[] = [];

  beforeEach(() => {
    Object.assign(seen, { calls: [], tokens: [], failuresLeft: 0, outerFromJob: [], startedAt: [] });
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });

  async function start(options: DistributedLockModuleOptions = { defer: {} }) {
    @Module({ imports: [DistributedLockTestingModule.forRoot(options)], providers: [Mailer] })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    moduleRef.useLogger(false);
    const app = await moduleRef.init();
    apps.push(app);
    return { app, mailer: app.get(Mailer), testing: app.get(LockTestingController) };
  }

  it('a free key runs at once; a busy key answers Deferred and the job runs here under the lock once it is free', async () => {
    const { mailer, testing } = await start({ defer: { queueName: 'mail' } });
    expect(await mailer.send('1', { text: 'now' })).toBe('sent 1:now');
    expect(testing.deferredJobs()).toEqual([]);

    const other = testing.hold('mail:1');
    const body = { text: 'later' };
    const answer = await mailer.send('1', body);
    expect(answer).toBeInstanceOf(Deferred);
    expect((answer as Deferred).toJSON()).toEqual({ status: 'deferred', jobId: '1', method: 'Mailer.send', queue: 'mail' });
    body.text = 'changed after the call'; // the job has a copy, as it would in Redis
    await sleep(30);
    expect(seen.calls).toEqual(['1:now']); // not run while the key is held elsewhere
    expect(testing.deferredJobs()).toMatchObject([{ id: '1', state: 'active', args: ['1', { text: 'later' }] }]);
    expect(testing.waiting('mail:1')).toBe(1); // the job waits for the lock in its FIFO queue

    other.release();
    expect(await testing.deferredJobsSettled()).toEqual([
      { id: '1', method: 'Mailer.send', args: ['1', { text: 'later' }], state: 'completed', attemptsMade: 1, result: 'sent 1:later' },
    ]);
    expect(seen.calls).toEqual(['1:now', '1:later']);
    expect(seen.tokens[1]).toBeGreaterThan(other.fencingToken); // under its own lock, after the hold
    expect(testing.isLocked('mail:1')).toBe(false);
  });

  it('with a waitTimeout, a busy key is waited for first: freed within it, the call runs now; still busy after it, the call is deferred', async () => {
    const { mailer, testing } = await start({ defer: {} });
    testing.hold('mail:1', { ttl: 100 });
    const firstAt = performance.now();
    expect(await mailer.sendPatiently('1')).toBe('sent 1'); // the hold lapsed while the call waited
    expect(performance.now() - firstAt).toBeGreaterThanOrEqual(95);
    expect(testing.deferredJobs()).toEqual([]);

    const long = testing.hold('mail:2', { ttl: 5_000 });
    const calledAt = performance.now();
    const answer = await mailer.sendPatiently('2');
    expect(answer).toBeInstanceOf(Deferred);
    expect(performance.now() - calledAt).toBeGreaterThanOrEqual(295); // waited its 300 ms first
    expect(seen.calls).toEqual(['patient 1']);
    long.release();
    expect(await testing.deferredJobsSettled()).toMatchObject([{ state: 'completed', result: 'sent 2' }]);
    expect(seen.calls).toEqual(['patient 1', 'patient 2']);
  });

  it('jobs run first come first, concurrency at a time; arguments are checked before the lock is tried', async () => {
    const { mailer, testing } = await start({ defer: { concurrency: 1 } });
    const other = testing.hold('mail:1');
    const answers = await Promise.all(['a', 'b', 'c'].map((text) => mailer.send('1', { text })));
    expect(answers.map((a) => (a as Deferred).jobId)).toEqual(['1', '2', '3']);
    await expect(mailer.send('1', { text: new Date() as never })).rejects.toBeInstanceOf(DeferArgumentError);
    // A getter (or Proxy trap) that throws while the argument is checked: it escaped as if the method had thrown it.
    const unreadable = {
      get text(): string {
        throw new TypeError('session expired');
      },
    };
    await expect(mailer.send('1', unreadable)).rejects.toThrow(
      /^@Locked on Mailer\.send: the call cannot be deferred: args\[1\] is a value that threw when read \(TypeError: session expired\)/,
    );
    await expect(mailer.send('1', unreadable)).rejects.toBeInstanceOf(DeferArgumentError);
    other.release();
    await testing.deferredJobsSettled();
    expect(seen.calls).toEqual(['1:a', '1:b', '1:c']);
  });

  it('with concurrency 2, two jobs run at once (on different keys)', async () => {
    const { mailer, testing } = await start({ shutdownTimeout: 1_000, defer: { concurrency: 2 } });
    testing.hold('mail:1', { ttl: 50 });
    testing.hold('mail:2', { ttl: 50 });
    testing.hold('mail:3', { ttl: 50 });
    for (const id of ['1', '2', '3']) await mailer.long(id, 10_000, true);
    await sleep(150);
    expect(testing.deferredJobs().map((j) => j.state)).toEqual(['active', 'active', 'waiting']);
    // Each waits for its own key's hold to lapse: which starts first is up to their retry timers.
    expect(seen.calls.sort()).toEqual(['long 1 started', 'long 2 started']);
  });

  it('a failed run is retried after backoff, doubled each time, up to attempts; then the job fails for good', async () => {
    const { mailer, testing } = await start({ defer: { attempts: 3, backoff: 50 } });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    testing.hold('mail:1', { ttl: 100 });
    seen.failuresLeft = 2;
    await mailer.send('1');
    await sleep(130);
    expect(testing.deferredJobs()).toMatchObject([{ state: 'delayed', attemptsMade: 1, failedReason: 'TypeError: boom 1' }]);
    const [job] = await testing.deferredJobsSettled();
    expect(job).toMatchObject({ state: 'completed', attemptsMade: 3, result: 'sent 1:' });
    const gaps = [seen.startedAt[1] - seen.startedAt[0], seen.startedAt[2] - seen.startedAt[1]];
    expect(gaps[0]).toBeGreaterThanOrEqual(45);
    expect(gaps[1]).toBeGreaterThanOrEqual(95); // exponential: 50, then 100

    testing.hold('mail:2', { ttl: 100 });
    seen.failuresLeft = 5;
    await mailer.send('2');
    const settled = await testing.deferredJobsSettled();
    expect(settled[1]).toMatchObject({ id: '2', state: 'failed', attemptsMade: 3, failedReason: 'TypeError: boom 2' });
    expect(errors.mock.calls.map(([message]) => String(message))).toEqual([
      expect.stringMatching(/Mailer\.send \(job 2\) failed for good: TypeError: boom 2/),
    ]);
    errors.mockRestore();
  });

  // A review ran the same method on BullMQ (1 run) and here (3 runs): the testing module retried it.
  it('a run that throws UnrecoverableError fails the job for good at once, whatever attempts are left, as on BullMQ', async () => {
    const { mailer, testing } = await start({ defer: { attempts: 3, backoff: 20 } });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    testing.hold('mail:9', { ttl: 50 });
    await mailer.charge('9');
    const [job] = await testing.deferredJobsSettled();
    expect(job).toMatchObject({ state: 'failed', attemptsMade: 1, failedReason: 'UnrecoverableError: card 9 declined for good' });
    expect(seen.calls).toEqual(['charge 9']);
    errors.mockRestore();
  });

  it('under jest.useFakeTimers(), backoff runs on the faked clock: advancing it runs the retry', async () => {
    const { mailer, testing } = await start({ defer: { attempts: 2, backoff: 60_000 } });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    jest.useFakeTimers();
    try {
      const other = testing.hold('mail:1');
      seen.failuresLeft = 1;
      expect(await mailer.send('1')).toBeInstanceOf(Deferred);
      other.release();
      await jest.advanceTimersByTimeAsync(10); // the first run, which throws
      expect(testing.deferredJobs()).toMatchObject([{ state: 'delayed', attemptsMade: 1 }]);
      await jest.advanceTimersByTimeAsync(59_000);
      expect(testing.deferredJobs()).toMatchObject([{ state: 'delayed', attemptsMade: 1 }]); // a minute's backoff is not over
      await jest.advanceTimersByTimeAsync(1_000);
      expect(testing.deferredJobs()).toMatchObject([{ state: 'completed', attemptsMade: 2, result: 'sent 1:' }]);
    } finally {
      jest.useRealTimers();
      errors.mockRestore();
    }
  });

  it('a key still busy when the worker runs the job: it waits (waitTimeout), then the run counts as failed and is retried', async () => {
    const { mailer, testing } = await start({ waitTimeout: 50, defer: { attempts: 3, backoff: 100 } });
    const other = testing.hold('mail:1');
    await mailer.send('1');
    await sleep(100);
    expect(testing.deferredJobs()).toMatchObject([{ state: 'delayed', attemptsMade: 1, failedReason: expect.stringMatching(/^LockTimeoutError: /) }]);
    other.release();
    expect(await testing.deferredJobsSettled()).toMatchObject([{ state: 'completed', attemptsMade: 2 }]);
    expect(seen.calls).toEqual(['1:']);
  });

  it('deferKey: repeated defers are one job while it is pending or completed; one that failed for good is retried', async () => {
    const { mailer, testing } = await start({ defer: { attempts: 1 } });
    jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    let other = testing.hold('mail:1');
    const first = (await mailer.sendOnce('1', 'r1', 'first')) as Deferred;
    const again = (await mailer.sendOnce('1', 'r1', 'second')) as Deferred;
    expect(again.jobId).toBe(first.jobId);
    expect(first.jobId).toMatch(/^Mailer\.sendOnce#/);
    other.release();
    await testing.deferredJobsSettled();
    expect(seen.calls).toEqual(['1:r1:first']); // one run, with the first call's arguments

    other = testing.hold('mail:1');
    expect(((await mailer.sendOnce('1', 'r1', 'third')) as Deferred).jobId).toBe(first.jobId); // completed: still that job
    // A free key runs at once, deferKey or not.
    other.release();
    expect(await mailer.sendOnce('1', 'r1', 'direct')).toBe('direct');
    await testing.deferredJobsSettled();
    expect(seen.calls).toEqual(['1:r1:first', '1:r1:direct']);

    other = testing.hold('mail:1', { ttl: 100 });
    seen.failuresLeft = 1;
    const failing = (await mailer.sendOnce('1', 'r2', 'x')) as Deferred;
    expect((await testing.deferredJobsSettled()).find((j) => j.id === failing.jobId)).toMatchObject({ state: 'failed', attemptsMade: 1 });
    other = testing.hold('mail:1', { ttl: 100 });
    expect(((await mailer.sendOnce('1', 'r2', 'y')) as Deferred).jobId).toBe(failing.jobId);
    expect((await testing.deferredJobsSettled()).find((j) => j.id === failing.jobId)).toMatchObject({ state: 'completed', result: 'x' });
    expect(testing.deferredJobs()).toHaveLength(2);
    jest.restoreAllMocks();
  });

  it('lock.defer.duration of a deferKey job failed for good, then retried by a repeat of its call: timed from the repeat, as on BullMQ', async () => {
    const otel = new OtelCapture();
    otel.install();
    try {
      const { mailer, testing } = await start({ defer: { attempts: 1 } });
      jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
      seen.failuresLeft = 1;
      testing.hold('mail:1', { ttl: 50 });
      const failing = (await mailer.sendOnce('1', 'r1', 'x')) as Deferred;
      expect((await testing.deferredJobsSettled())[0]).toMatchObject({ id: failing.jobId, state: 'failed' });
      const SAT_FAILED_MS = 500;
      await sleep(SAT_FAILED_MS);
      testing.hold('mail:1', { ttl: 50 });
      expect(((await mailer.sendOnce('1', 'r1', 'y')) as Deferred).jobId).toBe(failing.jobId);
      expect((await testing.deferredJobsSettled())[0]).toMatchObject({ state: 'completed' });

      const durations = Object.fromEntries(
        (await otel.find(LOCK_METRIC_NAMES.deferDuration, { 'lock.name': 'mail:<0>' })).map((p) => [p.attributes['lock.outcome'], p]),
      );
      expect([durations.failed.value, durations.completed.value]).toEqual([1, 1]);
      // Before: timed from the first enqueue, the time the job sat failed included.
      expect(durations.completed.max).toBeLessThan(SAT_FAILED_MS / 1000);
    } finally {
      jest.restoreAllMocks();
      await otel.uninstall();
    }
  });

  it("a job runs in the worker's context, not its caller's: the caller's locks are not the job's", async () => {
    const { app, mailer, testing } = await start();
    testing.hold('mail:1', { ttl: 100 });
    await app.get(LockService).withLock('outer', async () => {
      expect(await mailer.tryOuter('1')).toBeInstanceOf(Deferred);
      await sleep(200); // the job runs meanwhile, while this caller still holds 'outer'
    });
    await testing.deferredJobsSettled();
    expect(seen.outerFromJob).toEqual(['busy']);
  });

  it('app.close(): a running job is told through its signal and finishes under its lock; a job waiting for its lock goes back, not run', async () => {
    const { app, mailer, testing } = await start({ shutdownTimeout: 2_000, defer: {} });
    testing.hold('mail:1', { ttl: 100 });
    testing.hold('mail:2');
    await mailer.long('1', 10_000, true);
    await mailer.send('2');
    const settling = testing.deferredJobsSettled().catch((error: unknown) => error);
    await sleep(150);
    expect(seen.calls).toEqual(['long 1 started']);
    const closedAt = performance.now();
    await app.close();
    apps.splice(0);
    expect(performance.now() - closedAt).toBeLessThan(1_000);
    expect(seen.calls).toEqual(['long 1 started', 'long 1 ended: shutdown']);
    expect(testing.deferredJobs()).toMatchObject([
      { id: '1', state: 'completed' },
      { id: '2', state: 'waiting', attemptsMade: 0 },
    ]);
    expect(await settling).toBeInstanceOf(DistributedLockError);
    expect(String(await settling)).toMatch(/will not run: the module closed its worker/);
  });

  it('app.close() waits for a job that ignores its signal no longer than shutdownTimeout; a pending backoff timer is dropped', async () => {
    const { app, mailer, testing } = await start({ shutdownTimeout: 300, defer: { concurrency: 2, backoff: 60_000 } });
    const errors = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    testing.hold('mail:1', { ttl: 100 });
    await mailer.long('1', 1_000, false);
    testing.hold('mail:2', { ttl: 100 });
    seen.failuresLeft = 1;
    await mailer.send('2');
    await sleep(200);
    expect(testing.deferredJobs()).toMatchObject([{ state: 'active' }, { state: 'delayed', failedReason: 'TypeError: boom 2' }]);
    const closedAt = performance.now();
    await app.close();
    apps.splice(0);
    const took = performance.now() - closedAt;
    expect(took).toBeGreaterThanOrEqual(280);
    expect(took).toBeLessThan(900); // shutdownTimeout for the worker, then the lock service's own bounded drain
    expect(errors.mock.calls.map(([m]) => String(m))).toContainEqual(
      expect.stringMatching(/job\(s\) 1 .*still ran after shutdownTimeout \(300 ms\)/),
    );
    errors.mockRestore();
    await sleep(800); // the ignored job ends on its own; nothing else is left (--detectOpenHandles)
  });

  it('app.close() with jobs not run: deferredJobsSettled() is told that they will not run', async () => {
    const { app, mailer, testing } = await start();
    testing.hold('mail:1');
    await mailer.send('1');
    await mailer.send('1');
    const settling = testing.deferredJobsSettled();
    await app.close();
    apps.splice(0);
    await expect(settling).rejects.toThrow(
      /Deferred job\(s\) 1 \(Mailer\.send, waiting\), 2 \(Mailer\.send, waiting\) will not run: the module closed its worker/,
    );
  });

  it('with defer.worker false the jobs wait, and deferredJobsSettled() says nothing will run them', async () => {
    const { mailer, testing } = await start({ defer: { worker: false } });
    testing.hold('mail:1', { ttl: 50 });
    await mailer.send('1');
    await sleep(100);
    expect(testing.deferredJobs()).toMatchObject([{ state: 'waiting' }]);
    await expect(testing.deferredJobsSettled()).rejects.toThrow(/will not run: this module runs no worker \(defer\.worker: false\)/);
  });
});
