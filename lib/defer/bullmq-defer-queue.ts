import { createHash } from 'node:crypto';
import type { Logger } from '@nestjs/common';
import type { Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { DistributedLockError } from '../errors/distributed-lock.error';
import type { RedisConnectionOption } from '../options/distributed-lock-module-options.interface';
import { bullmqConnection } from '../redis/bullmq-connection';
import type { ResolvedDeferOptions } from '../options/defer-options.interface';
import type { LockMetrics } from '../observability/lock-metrics';
import { Deferred } from './deferred';
import { decodeDeferredArguments, encodeDeferredArguments, type EncodedArguments } from './defer-arguments';
import type { DeferQueue } from './defer-queue';
import type { DeferredMethod } from './deferred-methods';
import { isFinalFailure } from './final-failure';
import { storableResult } from './storable-result';

/** What a job carries: the method's stable name and its arguments (JSON). */
interface DeferredJobData extends EncodedArguments {
  readonly method: string;
}

/** A deferring method and the (singleton) instance the worker runs it on. */
export interface DeferTarget {
  readonly instance: object;
  readonly method: DeferredMethod;
}

/** How the worker runs a target under its lock: the application's `withLock` with the method's options and 'retry'. */
export type RunUnderLock = (target: DeferTarget, args: unknown[]) => Promise<unknown>;

/** Completed jobs stay this long, so a repeated defer with the same `deferKey` is still recognised (idempotency window). */
const KEEP_COMPLETED_SECONDS = 3600;

/**
 * The BullMQ side of `onBusy: 'defer'`: a Queue every instance enqueues on and, unless `worker: false`, a
 * Worker running the jobs. Loaded only when the module has a `defer` option (bullmq is an optional peer).
 * Its connections are its own (BullMQ's blocking commands need `maxRetriesPerRequest: null`), built from
 * the module's `redis` option, or `duplicate()`d from a client you passed, and closed by `close()`.
 */
export class BullmqDeferQueue implements DeferQueue {
  private readonly connections: Redis[] = [];
  private readonly queue: Queue<DeferredJobData>;
  private worker?: Worker<DeferredJobData>;
  /** Enqueues in flight: close() lets them land before closing the connection they use. */
  private readonly adding = new Set<Promise<Deferred>>();
  private closing?: Promise<void>;

  constructor(
    private readonly options: ResolvedDeferOptions,
    private readonly redis: RedisConnectionOption,
    private readonly metrics: LockMetrics,
    private readonly logger: Logger,
  ) {
    const { Queue: QueueClass } = loadBullmq();
    this.queue = new QueueClass<DeferredJobData>(options.queueName, { connection: this.connect() });
    this.queue.on('error', (error) => this.logger.warn(`Defer queue "${options.queueName}": ${error.message}`));
  }

  get closed(): boolean {
    return this.closing !== undefined;
  }

  async enqueue(method: DeferredMethod, args: readonly unknown[]): Promise<Deferred> {
    if (this.closing)
      throw new DistributedLockError(
        `The defer queue "${this.options.queueName}" is closed (application shutdown): ${method.name} was not enqueued.`,
      );
    const adding = this.add(method, args);
    this.adding.add(adding);
    try {
      return await adding;
    } finally {
      this.adding.delete(adding);
    }
  }

  private async add(method: DeferredMethod, args: readonly unknown[]): Promise<Deferred> {
    const encoded = encodeDeferredArguments(args, method.where);
    const jobId = method.deferKey ? idempotentJobId(method.name, method.deferKey.resolve(undefined, args)) : undefined;
    const { attempts, backoff } = this.options;
    const job = await this.queue.add(
      method.name,
      { method: method.name, ...encoded },
      { jobId, attempts, backoff: { type: 'exponential', delay: backoff }, removeOnComplete: { age: KEEP_COMPLETED_SECONDS }, removeOnFail: false },
    );
    this.metrics.deferred(lockNameOf(method), 'enqueued');
    return new Deferred(job.id ?? '', method.name, this.options.queueName);
  }

  /** Starts this instance's worker over the deferring methods found at startup (by stable name). */
  startWorker(targets: ReadonlyMap<string, DeferTarget>, run: RunUnderLock): void {
    const { Worker: WorkerClass } = loadBullmq();
    const worker = new WorkerClass<DeferredJobData>(this.options.queueName, (job) => this.process(job, targets, run), {
      connection: this.connect(),
      concurrency: this.options.concurrency,
      lockDuration: this.options.jobLease,
      stalledInterval: this.options.jobLease,
      // A run cut short by a dead worker (a stall) is run again as often as `attempts` allows; BullMQ's
      // default (1) failed a job for good at its second stall, attempts left or not.
      maxStalledCount: this.options.attempts - 1,
    });
    worker.on('error', (error) => this.logger.warn(`Defer worker "${this.options.queueName}": ${error.message}`));
    worker.on('completed', (job) => this.finished(job, targets, 'completed'));
    worker.on('failed', (job, error) => {
      if (!job) return;
      if (!isFinalFailure(job, error)) return this.metrics.deferred(this.metricName(job, targets), 'retried');
      this.finished(job, targets, 'failed');
      this.logger.error(
        `Deferred ${job.data.method} (job ${job.id}) failed for good: ${error.message} (${job.attemptsStarted} attempt(s) started, ` +
          `${job.stalledCounter} cut short by a worker that stopped); it stays in the failed set of queue "${this.options.queueName}".`,
      );
    });
    this.worker = worker;
  }

  /**
   * Shutdown, first step: this instance's worker takes no new job and waits for the running ones (they
   * finish under their locks, the lock service still open). Jobs not started stay in the queue for another
   * instance. Enqueueing still works meanwhile: the application keeps serving until it closes.
   */
  async closeWorker(): Promise<void> {
    await this.worker?.close();
  }

  /** Shutdown, last step: the worker (if still open), enqueues in flight, then the queue and its connections. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.closeWorker();
      await Promise.allSettled([...this.adding]);
      await this.queue.close();
      await Promise.all(this.connections.map((c) => c.quit().catch(() => c.disconnect())));
    })();
    return this.closing;
  }

  private async process(job: Job<DeferredJobData>, targets: ReadonlyMap<string, DeferTarget>, run: RunUnderLock): Promise<unknown> {
    const target = targets.get(job.data.method);
    if (!target) throw new DistributedLockError(`No singleton provider with the deferring method ${job.data.method} on this instance.`);
    let result: unknown;
    try {
      result = await run(target, decodeDeferredArguments(job.data));
    } catch (error) {
      // The failed set keeps the message only: put the error's type name in it (`LockTimeoutError: …`).
      const e = error instanceof Error ? error : new Error(String(error));
      throw Object.assign(new Error(`${e.name}: ${e.message}`), { name: e.name });
    }
    // The method ran: from here on nothing may fail the job (a failed job is run again).
    return storableResult(result, job.data.method, job.id, this.logger);
  }

  private finished(job: Job<DeferredJobData>, targets: ReadonlyMap<string, DeferTarget>, outcome: 'completed' | 'failed'): void {
    const name = this.metricName(job, targets);
    this.metrics.deferred(name, outcome);
    this.metrics.deferDuration(name, outcome, Math.max(0, Date.now() - job.timestamp));
  }

  private metricName(job: Job<DeferredJobData>, targets: ReadonlyMap<string, DeferTarget>): string {
    const target = targets.get(job.data.method);
    return target ? lockNameOf(target.method) : job.data.method;
  }

  private connect(): Redis {
    const connection = bullmqConnection(this.redis);
    this.connections.push(connection);
    return connection;
  }
}

const lockNameOf = (m: DeferredMethod): string => m.lockOptions.name ?? m.name;

/** A jobId BullMQ accepts (no ':' and not an integer), one per resolved deferKey of the method. */
function idempotentJobId(method: string, keys: readonly string[]): string {
  return `${method}#${createHash('sha256').update(keys.join('\0')).digest('base64url').slice(0, 32)}`;
}

/** bullmq, required on first use only (optional peer dependency). */
function loadBullmq(): typeof import('bullmq') {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer: a static import would make it mandatory
    return require('bullmq') as typeof import('bullmq');
  } catch (error) {
    throw new DistributedLockError(`The module's "defer" option needs the bullmq package: npm install bullmq.`, { cause: error });
  }
}
