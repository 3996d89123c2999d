/**
 * The defer metrics through a real OpenTelemetry SDK (MeterProvider + an in-memory reader), on a real Redis
 * with real BullMQ: `lock.deferred` by outcome (enqueued, retried, completed, failed) and `lock.defer.duration`
 * (from the call that enqueued the job, or retried it after it failed for good, to its end) by outcome, named by
 * the lock's template, never by its key.
 */
import { INestApplication, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockService, Locked } from '../../lib';
import { LOCK_METRIC_NAMES } from '../../lib/observability/otel-lock-metrics';
import { OtelCapture, type Point } from '../harness/otel-capture';
import { RedisProcess } from '../harness/redis-process';
import { pollUntil, sleep } from '../unit/core-helpers';

const DEFERRED = LOCK_METRIC_NAMES.deferred;
const DURATION = LOCK_METRIC_NAMES.deferDuration;

/** Calls of `flaky` so far, per id: it throws on its first run only. */
const flakyRuns = new Map<string, number>();
/** Whether `keyed` throws: its job fails for good while set. */
let keyedFails = true;

@Injectable()
class Metered {
  @Locked('metered:<0>', { onBusy: 'defer' })
  async work(id: string): Promise<string | Deferred> {
    await sleep(5);
    return id;
  }

  @Locked('flaky:<0>', { onBusy: 'defer' })
  async flaky(id: string): Promise<string | Deferred> {
    const run = (flakyRuns.get(id) ?? 0) + 1;
    flakyRuns.set(id, run);
    if (run === 1) throw new Error('first run fails');
    return id;
  }

  @Locked('keyed:<0>', { onBusy: 'defer', deferKey: 'keyed-request:<1>' })
  async keyed(id: string, _requestId: string): Promise<string | Deferred> {
    if (keyedFails) throw new Error('not yet');
    return id;
  }

  @Locked('doomed:<0>', { onBusy: 'defer' })
  async doomed(id: string): Promise<void | Deferred> {
    await sleep(1);
    throw new RangeError(`${id} never works`);
  }
}

describe("onBusy 'defer' metrics through a real OpenTelemetry MeterProvider", () => {
  let redis: RedisProcess;
  let otel: OtelCapture;
  let app: INestApplication | undefined;
  let testNo = 0;

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });
  afterAll(() => redis.stop());
  beforeEach(() => {
    otel = new OtelCapture();
    otel.install();
    flakyRuns.clear();
    keyedFails = true;
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await otel.uninstall();
  });

  async function start(): Promise<{ metered: Metered; locks: LockService; queueName: string }> {
    const queueName = `defer-metrics-${++testNo}`;
    @Module({
      imports: [
        DistributedLockModule.forRoot({
          redis: redis.url,
          keyPrefix: 'defer-metrics:',
          defer: { queueName, attempts: 2, backoff: 20 },
        }),
      ],
      providers: [Metered],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = moduleRef.createNestApplication({ logger: ['error'] });
    await app.init();
    return { metered: app.get(Metered), locks: app.get(LockService), queueName };
  }

  /** Defers `keyed(id, requestId)` behind a held lock, then frees the key for the job. */
  async function deferKeyed(metered: Metered, locks: LockService, id: string, requestId: string): Promise<Deferred> {
    const held = await locks.acquire(`keyed:${id}`, { name: 'keyed:<0>' });
    const deferred = await metered.keyed(id, requestId);
    await held.release();
    expect(deferred).toBeInstanceOf(Deferred);
    return deferred as Deferred;
  }

  /** The keyed jobs' duration points, by outcome. */
  async function keyedDurations(): Promise<Record<string, Point>> {
    return Object.fromEntries((await otel.find(DURATION, { 'lock.name': 'keyed:<0>' })).map((p) => [p.attributes['lock.outcome'], p]));
  }

  const keyedEnds = (outcome: 'completed' | 'failed') => otel.total(DEFERRED, { 'lock.name': 'keyed:<0>', 'lock.outcome': outcome });

  it('enqueued when deferred, completed when the job ran; the duration spans the wait for the lock; named by template', async () => {
    const { metered, locks } = await start();
    const held = await locks.acquire('metered:k1', { name: 'metered:<0>' });
    expect(await metered.work('k1')).toBeInstanceOf(Deferred);
    expect(await metered.work('k1')).toBeInstanceOf(Deferred);
    expect(await otel.find(DEFERRED)).toEqual([
      expect.objectContaining({ attributes: { 'lock.name': 'metered:<0>', 'lock.outcome': 'enqueued' }, value: 2 }),
    ]);
    await sleep(300); // the jobs wait for the held lock: their duration includes this
    await held.release();

    expect(await pollUntil(async () => (await otel.total(DEFERRED, { 'lock.outcome': 'completed' })) === 2, 20_000, 25)).toBe(true);
    const [duration] = await otel.find(DURATION);
    expect(duration.attributes).toEqual({ 'lock.name': 'metered:<0>', 'lock.outcome': 'completed' });
    expect(duration.value).toBe(2);
    expect(duration.min).toBeGreaterThanOrEqual(0.29);
    expect(duration.max).toBeLessThan(20);
    // A call that found the key free ran at once: no defer metric for it.
    expect(await metered.work('k2')).toBe('k2');
    expect(await otel.total(DEFERRED)).toBe(4); // 2 enqueued + 2 completed
    // The key (k1, k2) appears in no attribute of any lock metric.
    expect(JSON.stringify(await otel.points())).not.toMatch(/k1|k2/);
  });

  it('a run that throws once is counted retried, then completed; one that always throws: retried, then failed with its duration', async () => {
    const { metered, locks } = await start();
    const heldFlaky = await locks.acquire('flaky:f', { name: 'flaky:<0>' });
    const heldDoomed = await locks.acquire('doomed:d', { name: 'doomed:<0>' });
    expect(await metered.flaky('f')).toBeInstanceOf(Deferred);
    expect(await metered.doomed('d')).toBeInstanceOf(Deferred);
    await heldFlaky.release();
    await heldDoomed.release();

    const finished = async () =>
      (await otel.total(DEFERRED, { 'lock.outcome': 'completed' })) === 1 && (await otel.total(DEFERRED, { 'lock.outcome': 'failed' })) === 1;
    expect(await pollUntil(finished, 20_000, 25)).toBe(true);
    const counts = async (name: string) =>
      Object.fromEntries((await otel.find(DEFERRED, { 'lock.name': name })).map((p) => [p.attributes['lock.outcome'], p.value]));
    expect(await counts('flaky:<0>')).toEqual({ enqueued: 1, retried: 1, completed: 1 });
    expect(await counts('doomed:<0>')).toEqual({ enqueued: 1, retried: 1, failed: 1 });
    expect(flakyRuns.get('f')).toBe(2);

    const durations = await otel.find(DURATION);
    expect(durations.map((p) => p.attributes).sort((a, b) => String(a['lock.name']).localeCompare(String(b['lock.name'])))).toEqual([
      { 'lock.name': 'doomed:<0>', 'lock.outcome': 'failed' },
      { 'lock.name': 'flaky:<0>', 'lock.outcome': 'completed' },
    ]);
    // One sample each: a retry is not an end, only the final outcome is timed.
    expect(durations.map((p) => p.value)).toEqual([1, 1]);
  });

  it('a deferKey job failed for good, then retried by a repeat of its call: one sample per call, the second timed from the repeat, not from the first enqueue', async () => {
    const { metered, locks } = await start();
    const first = await deferKeyed(metered, locks, 'k', 'r1');
    expect(await pollUntil(async () => (await keyedEnds('failed')) === 1, 20_000, 25)).toBe(true);
    const SAT_FAILED_MS = 2_000;
    await sleep(SAT_FAILED_MS); // in BullMQ's failed set meanwhile: no call waits for it

    keyedFails = false;
    const repeat = await deferKeyed(metered, locks, 'k', 'r1');
    expect(repeat.jobId).toBe(first.jobId); // the failed job, retried
    expect(await pollUntil(async () => (await keyedEnds('completed')) === 1, 20_000, 25)).toBe(true);

    const durations = await keyedDurations();
    expect([durations.failed.value, durations.completed.value]).toEqual([1, 1]);
    // Before: timed from the job's first enqueue (BullMQ keeps its timestamp), the time it sat failed included.
    expect(durations.completed.max).toBeLessThan(SAT_FAILED_MS / 1000);
    const counts = Object.fromEntries((await otel.find(DEFERRED, { 'lock.name': 'keyed:<0>' })).map((p) => [p.attributes['lock.outcome'], p.value]));
    expect(counts).toEqual({ enqueued: 2, retried: 1, failed: 1, completed: 1 });
  });

  it("a job failed for good, then retried from outside the library (a dashboard's job.retry()): its end is counted, with no duration sample", async () => {
    const { metered, locks, queueName } = await start();
    const deferred = await deferKeyed(metered, locks, 'd', 'r1');
    expect(await pollUntil(async () => (await keyedEnds('failed')) === 1, 20_000, 25)).toBe(true);
    await sleep(500); // in the failed set meanwhile

    keyedFails = false;
    const queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
    try {
      await (await queue.getJob(deferred.jobId))!.retry('failed');
      expect(await pollUntil(async () => (await keyedEnds('completed')) === 1, 20_000, 25)).toBe(true);
    } finally {
      await queue.close();
    }
    // When it was retried is not known: a sample from its first enqueue would count the time it sat failed.
    const durations = await keyedDurations();
    expect(durations.failed.value).toBe(1);
    expect(durations.completed).toBeUndefined();
  });
});
