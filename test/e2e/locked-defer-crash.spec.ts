/**
 * At-least-once delivery of deferred calls: a worker process killed (kill -9) or frozen (SIGSTOP) mid-job has
 * its job run again by another instance once BullMQ's job lease lapses; the fencing token makes a frozen
 * run's late write lose against the re-run's.
 */
import { INestApplicationContext, Logger, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import * as path from 'path';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockService } from '../../lib';
import { LOCK_METRIC_NAMES } from '../../lib/observability/otel-lock-metrics';
import { OtelCapture } from '../harness/otel-capture';
import { RedisProcess } from '../harness/redis-process';
import { killSurvivors, startWorker, WorkerHandle } from '../harness/worker-process';
import { pollUntil } from '../unit/core-helpers';
import { STOCK_IO, Stock } from './workers/support/deferred-stock';

const WORKER = path.join(__dirname, 'workers', 'defer-stock.worker.ts');
const JOB_LEASE = 1_000;

describe("onBusy 'defer': a worker killed or frozen mid-job", () => {
  let redis: RedisProcess;
  const contexts: INestApplicationContext[] = [];
  const workers: WorkerHandle[] = [];
  let queue: Queue | undefined;
  let testNo = 0;
  let queueName = '';
  const lines: Record<string, unknown>[] = [];

  beforeAll(async () => {
    redis = await RedisProcess.start();
  });
  afterAll(async () => {
    killSurvivors();
    await redis.stop();
  });
  beforeEach(() => {
    queueName = `defer-crash-${++testNo}`;
    lines.length = 0;
  });
  afterEach(async () => {
    for (const c of contexts.splice(0)) await c.close();
    for (const w of workers.splice(0)) {
      try {
        w.resume(); // a frozen worker must be able to stop
      } catch {
        // already exited (killed)
      }
      await w.stop();
    }
    await queue?.close();
    queue = undefined;
  });

  /** An instance in this process: a producer only, or a worker too. */
  async function instance(worker: boolean, attempts = 3, refuse = false): Promise<{ stock: Stock; locks: LockService }> {
    const client = redis.client();
    @Module({
      imports: [
        DistributedLockModule.forRoot({
          redis: redis.url,
          keyPrefix: 'defer-crash:',
          defer: { queueName, worker, jobLease: JOB_LEASE, attempts, backoff: 50 },
        }),
      ],
      providers: [Stock, { provide: STOCK_IO, useValue: { client, stallMs: 0, refuse, report: (l: Record<string, unknown>) => lines.push(l) } }],
    })
    class LocalModule {}
    const ref = await Test.createTestingModule({ imports: [LocalModule] }).compile();
    const ctx = await ref.init();
    contexts.push(ctx);
    return { stock: ctx.get(Stock), locks: ctx.get(LockService) };
  }

  async function deferOneJob(item: string, attempts = 3): Promise<Deferred> {
    const producer = await instance(false, attempts);
    const held = await producer.locks.acquire(`stock:${item}`);
    const answer = await producer.stock.write(item, 'v');
    expect(answer).toBeInstanceOf(Deferred);
    await held.release();
    queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
    return answer as Deferred;
  }

  function startStockWorker(stallMs: number, attempts = 3): WorkerHandle {
    const env = { REDIS_URL: redis.url, QUEUE: queueName, STALL_MS: String(stallMs), JOB_LEASE: String(JOB_LEASE), ATTEMPTS: String(attempts) };
    const w = startWorker(WORKER, { env });
    workers.push(w);
    return w;
  }

  it('kill -9 mid-job: another instance runs the job again (stalled-job recovery) and it completes once', async () => {
    const job = await deferOneJob('k');
    const doomed = startStockWorker(60_000);
    const started = await doomed.waitFor((l) => l.event === 'started', 15_000);
    await doomed.kill9();
    await instance(true); // the surviving instance's worker
    expect(await pollUntil(async () => (await queue!.getJobState(job.jobId)) === 'completed', 20_000, 50)).toBe(true);
    const reruns = lines.filter((l) => l.event === 'wrote');
    expect(reruns).toHaveLength(1);
    expect(reruns[0].accepted).toBe(true);
    expect(reruns[0].token as number).toBeGreaterThan(started.token as number);
    expect(await redis.client().hget('store:k', 'value')).toBe(`v@${process.pid}`);
  }, 45_000);

  it('SIGSTOP mid-job past its leases: the re-run writes; the frozen run, resumed, writes with its old token and loses', async () => {
    const job = await deferOneJob('s');
    const frozen = startStockWorker(300);
    const started = await frozen.waitFor((l) => l.event === 'started', 15_000);
    frozen.pause();
    await instance(true);
    expect(await pollUntil(async () => (await queue!.getJobState(job.jobId)) === 'completed', 20_000, 50)).toBe(true);
    const rerun = lines.find((l) => l.event === 'wrote')!;
    expect(rerun.accepted).toBe(true);
    expect(rerun.token as number).toBeGreaterThan(started.token as number);
    frozen.resume();
    const late = await frozen.waitFor((l) => l.event === 'wrote', 10_000);
    expect(late.accepted).toBe(false); // the stale run's write lost by fencing token
    expect(await redis.client().hget('store:s', 'value')).toBe(`v@${process.pid}`);
  }, 45_000);

  /** Worker processes, one after the other, each killed -9 once it started the job: `kills` crashed runs. */
  async function crashRuns(kills: number, attempts: number): Promise<number[]> {
    const tokens: number[] = [];
    for (let i = 0; i < kills; i++) {
      const doomed = startStockWorker(60_000, attempts);
      tokens.push((await doomed.waitFor((l) => l.event === 'started', 20_000)).token as number);
      await doomed.kill9();
    }
    return tokens;
  }

  it('killed -9 twice mid-job with attempts 3: the job is run a third time and completes (BullMQ alone gives up after one stall)', async () => {
    const job = await deferOneJob('twice');
    const crashed = await crashRuns(2, 3);
    await instance(true);
    expect(await pollUntil(async () => ['completed', 'failed'].includes(await queue!.getJobState(job.jobId)), 20_000, 50)).toBe(true);
    const finished = (await queue!.getJob(job.jobId))!;
    expect(finished.failedReason).toBeFalsy();
    expect(await finished.getState()).toBe('completed');
    const wrote = lines.filter((l) => l.event === 'wrote');
    expect(wrote).toHaveLength(1);
    expect(wrote[0].token as number).toBeGreaterThan(Math.max(...crashed));
  }, 60_000);

  it('a job whose every run was killed reaches its final failure: logged as an error and counted failed, not retried', async () => {
    const otel = new OtelCapture();
    otel.install();
    const errors = jest.spyOn(Logger.prototype, 'error');
    try {
      // attempts 2: two crashed runs use them up.
      const job = await deferOneJob('always', 2);
      await crashRuns(2, 2);
      await instance(true, 2);
      expect(await pollUntil(async () => (await queue!.getJobState(job.jobId)) === 'failed', 20_000, 50)).toBe(true);
      const failed = (await queue!.getJob(job.jobId))!;
      expect(failed.failedReason).toMatch(/stalled more than allowable limit/);
      expect(lines.filter((l) => l.event === 'started')).toHaveLength(0); // never run a third time
      const reported = () => otel.find(LOCK_METRIC_NAMES.deferred, { 'lock.outcome': 'failed' });
      expect(await pollUntil(async () => (await reported()).length === 1, 5_000, 20)).toBe(true);
      expect(await otel.find(LOCK_METRIC_NAMES.deferred, { 'lock.outcome': 'retried' })).toEqual([]);
      const logged = errors.mock.calls.map(([message]) => String(message));
      expect(logged).toEqual([
        expect.stringMatching(new RegExp(`Deferred Stock\\.write \\(job ${job.jobId}\\) failed.*stalled more than allowable limit`)),
      ]);
    } finally {
      errors.mockRestore();
      await otel.uninstall();
    }
  }, 60_000);

  it('attempts bound every run, killed or failed: attempts 2, one run killed -9, the next fails: not run a third time', async () => {
    const job = await deferOneJob('bound', 2);
    await crashRuns(1, 2);
    await instance(true, 2, true); // its runs throw
    expect(await pollUntil(async () => (await queue!.getJobState(job.jobId)) === 'failed', 20_000, 50)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 500)); // a third run, if any, would have started by now
    // Before: BullMQ counts stalls and failures apart, so the failed run was retried: 3 runs for attempts 2.
    expect(lines.filter((l) => l.event === 'started')).toHaveLength(1);
    const failed = (await queue!.getJob(job.jobId))!;
    expect(failed.failedReason).toMatch(/started 2 time\(s\) already .*all of its attempts \(2\); not run again/);
  }, 60_000);
});
