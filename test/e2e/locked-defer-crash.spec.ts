/**
 * At-least-once delivery of deferred calls: a worker process killed (kill -9) or frozen (SIGSTOP) mid-job has
 * its job run again by another instance once BullMQ's job lease lapses; the fencing token makes a frozen
 * run's late write lose against the re-run's.
 */
import { INestApplicationContext, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Queue } from 'bullmq';
import * as path from 'path';
import '../harness/quiet-logs';
import { Deferred, DistributedLockModule, LockService } from '../../lib';
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
  async function instance(worker: boolean): Promise<{ stock: Stock; locks: LockService }> {
    const client = redis.client();
    @Module({
      imports: [
        DistributedLockModule.forRoot({
          redis: redis.url,
          keyPrefix: 'defer-crash:',
          defer: { queueName, worker, jobLease: JOB_LEASE, attempts: 3, backoff: 50 },
        }),
      ],
      providers: [Stock, { provide: STOCK_IO, useValue: { client, stallMs: 0, report: (l: Record<string, unknown>) => lines.push(l) } }],
    })
    class LocalModule {}
    const ref = await Test.createTestingModule({ imports: [LocalModule] }).compile();
    const ctx = await ref.init();
    contexts.push(ctx);
    return { stock: ctx.get(Stock), locks: ctx.get(LockService) };
  }

  async function deferOneJob(item: string): Promise<Deferred> {
    const producer = await instance(false);
    const held = await producer.locks.acquire(`stock:${item}`);
    const answer = await producer.stock.write(item, 'v');
    expect(answer).toBeInstanceOf(Deferred);
    await held.release();
    queue = new Queue(queueName, { connection: { host: redis.host, port: redis.port } });
    return answer as Deferred;
  }

  function startStockWorker(stallMs: number): WorkerHandle {
    const w = startWorker(WORKER, { env: { REDIS_URL: redis.url, QUEUE: queueName, STALL_MS: String(stallMs), JOB_LEASE: String(JOB_LEASE) } });
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
});
