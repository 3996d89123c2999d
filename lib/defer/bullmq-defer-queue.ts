import type { Logger } from '@nestjs/common';
import type { Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { DistributedLockError } from '../errors/distributed-lock.error';
import type { RedisConnectionOption } from '../options/distributed-lock-module-options.interface';
import { bullmqConnection, bullmqPrefix, type BullmqConnectionRole } from '../redis/bullmq-connection';
import { closeConnection, waitUntilReady } from '../redis/redis-connection';
import type { ResolvedDeferOptions } from '../options/defer-options.interface';
import type { LockMetrics } from '../observability/lock-metrics';
import { monotonicNow } from '../time/clock';
import { settledWithin, withDeadline } from '../time/deadline';
import { Deferred } from './deferred';
import { encodeDeferredArguments, type EncodedArguments } from './defer-arguments';
import type { DeferJobQueue, DeferLimits, DeferQueueContext, RunUnderLock } from './defer-job-queue';
import { prepareDeferKeyJob } from './defer-key-job';
import { DEFER_KEY_WINDOW_MS, deferKeyJobId } from './defer-key-job-id';
import type { DeferTarget } from './defer-target';
import type { DeferTargets } from './defer-targets';
import { deferredMetricName } from './deferred-methods';
import { runDeferredJob, type DeferredJobData } from './deferred-job-run';
import { enqueueBound } from './enqueue-bound';
import { enqueueFailure, enqueueNotSent, enqueueTimeout } from './enqueue-failure';
import { isFinalFailure } from './final-failure';
import { JobDrain, workerShutdownNotice } from './job-drain';
import { deferredAtOfCompleted, deferredAtOfFailed } from './job-deferred-at';
import { countJobRun, resetJobRuns, uncountJobRun } from './job-run-count';

/** Completed jobs stay as long as they stand for repeated defers with their `deferKey`. */
const KEEP_COMPLETED_SECONDS = DEFER_KEY_WINDOW_MS / 1000;

/**
 * The BullMQ side of `onBusy: 'defer'`: a Queue every instance enqueues on and, unless `worker: false`, a
 * Worker running the jobs. Loaded only when the module has a `defer` option (bullmq is an optional peer).
 * Its connections are its own, built from the module's `redis` option, or `duplicate()`d from a client you
 * passed, and closed by `close()` (see bullmq-connection.ts for what each is configured for).
 */
export class BullmqDeferQueue implements DeferJobQueue {
  private readonly bullmq: typeof import('bullmq');
  private readonly connections: Redis[] = [];
  private readonly queue: Queue<DeferredJobData>;
  /** The queue's connection: an enqueue is sent only while it is ready (see add). */
  private readonly queueConnection: Redis;
  private worker?: Worker<DeferredJobData>;
  private readonly drain = new JobDrain();
  /** Enqueues in flight: close() lets them land before closing the connection they use. */
  private readonly adding = new Set<Promise<Deferred>>();
  /** Ends of jobs being recorded (their start is read from Redis): close() lets them finish first, as enqueues. */
  private readonly recording = new Set<Promise<void>>();
  private workerClosing?: Promise<void>;
  private closing?: Promise<void>;

  constructor(
    private readonly options: ResolvedDeferOptions,
    private readonly redis: RedisConnectionOption,
    private readonly limits: DeferLimits,
    private readonly metrics: LockMetrics,
    private readonly logger: Logger,
  ) {
    this.bullmq = loadBullmq();
    this.queueConnection = this.connect('queue');
    try {
      this.queue = new this.bullmq.Queue<DeferredJobData>(options.queueName, { connection: this.queueConnection, ...this.prefix });
    } catch (error) {
      // Nobody could close a connection made by a constructor that throws: it would keep the process alive.
      for (const connection of this.connections) connection.disconnect();
      throw error;
    }
    this.queue.on('error', (error) => this.logger.warn(`Defer queue "${options.queueName}": ${error.message}`));
  }

  /** The production queue of a lock module's coordinator (see DeferQueueFactory). */
  static create({ settings, options, limits, metrics, logger }: DeferQueueContext): BullmqDeferQueue {
    // `defer` with `nodes` (Redlock: no single Redis for the queue) was refused when the LockService was built.
    return new BullmqDeferQueue(settings, options.redis as RedisConnectionOption, limits, metrics, logger);
  }

  get closed(): boolean {
    return this.closing !== undefined;
  }

  async enqueue(target: DeferTarget, args: readonly unknown[], deferKey?: readonly string[]): Promise<Deferred> {
    if (this.closing)
      throw new DistributedLockError(
        `The defer queue "${this.options.queueName}" is closed (application shutdown): ${target.name} was not enqueued.`,
      );
    const adding = this.add(target, args, deferKey);
    this.adding.add(adding);
    try {
      return await adding;
    } finally {
      this.adding.delete(adding);
    }
  }

  private async add(target: DeferTarget, args: readonly unknown[], deferKey: readonly string[] | undefined): Promise<Deferred> {
    const { name, method } = target;
    const { data, jsonBytes } = encodeDeferredArguments(args, method.where);
    const jobId = deferKey ? deferKeyJobId(name, deferKey) : undefined;
    const { commandTimeout } = this.limits;
    // BullMQ holds an add until its connection is ready, however long that takes, and our deadline cannot
    // cancel it: an add handed over while Redis is unreachable would land whenever Redis is back, after
    // the caller was told it failed. So it is handed over only once the connection is ready, within the bound.
    const startedAt = monotonicNow();
    if (this.queueConnection.status !== 'ready' && !(await waitUntilReady(this.queueConnection, commandTimeout))) {
      throw enqueueNotSent(name, this.queueConnection.status, commandTimeout);
    }
    // Bounded like every command of the lock (a caller told "busy, deferred" must not wait on a Redis that is
    // gone), with time for the arguments to be written.
    const bound = enqueueBound(commandTimeout, jsonBytes);
    const left = Math.max(1, bound - (monotonicNow() - startedAt));
    let id: string;
    try {
      id = await withDeadline(this.store(name, data, jobId), left, () => enqueueTimeout(name, bound, commandTimeout));
    } catch (error) {
      throw enqueueFailure(name, error);
    }
    this.metrics.deferred(deferredMetricName(method), 'enqueued');
    return new Deferred(id, name, this.options.queueName);
  }

  /** Adds the job (or, for a deferKey naming a job that failed for good, retries that one); resolves to its id. */
  private async store(name: string, encoded: EncodedArguments, jobId: string | undefined): Promise<string> {
    if (jobId !== undefined && (await prepareDeferKeyJob(this.queue, this.queueConnection, jobId, KEEP_COMPLETED_SECONDS * 1000)) === 'retried')
      return jobId;
    const { attempts, backoff } = this.options;
    const job = await this.queue.add(
      name,
      { method: name, ...encoded },
      { jobId, attempts, backoff: { type: 'exponential', delay: backoff }, removeOnComplete: { age: KEEP_COMPLETED_SECONDS }, removeOnFail: false },
    );
    return job.id ?? '';
  }

  startWorker(targets: DeferTargets, run: RunUnderLock): void {
    const worker = new this.bullmq.Worker<DeferredJobData>(this.options.queueName, (job, token) => this.process(job, token, targets, run), {
      connection: this.connect('worker'),
      ...this.prefix,
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
      if (!isFinalFailure(job, error)) return this.metrics.deferred(targets.metricName(job.data.method), 'retried');
      this.finished(job, targets, 'failed');
      // Whoever retries it later (a dashboard's job.retry(), a deferKey's call) gives it its runs again.
      resetJobRuns(this.queue, this.queueConnection, job.id ?? '').catch(() => undefined);
      this.logger.error(
        `Deferred ${job.data.method} (job ${job.id}) failed for good: ${error.message} (${job.attemptsStarted} attempt(s) started, ` +
          `${job.stalledCounter ?? 'an unknown number'} cut short by a worker that stopped); it stays in the failed set of queue "${this.options.queueName}".`,
      );
    });
    this.worker = worker;
  }

  /**
   * Shutdown, first step: this instance's worker takes no new job; jobs still waiting for their lock go back
   * to the queue at once (for another instance); jobs running under their lock are told through the lock's
   * `signal` (LockLostError, reason 'shutdown', as LockService.close() tells direct calls) and waited for,
   * bounded by `shutdownTimeout`. A job still running after that is left to run: the worker closes without
   * it, its BullMQ lease lapses and another instance runs it again (at-least-once), while its lock stays
   * held under it until it ends or the lock service's shutdown lets the lease lapse. Enqueueing still works
   * meanwhile: the application keeps serving until it closes.
   */
  closeWorker(): Promise<void> {
    this.workerClosing ??= this.stopWorker();
    return this.workerClosing;
  }

  private async stopWorker(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    const { shutdownTimeout, commandTimeout } = this.limits;
    const startedAt = monotonicNow();
    // Stops fetching without waiting for the running jobs: that wait is the bounded one below.
    worker.pause(true).catch(() => undefined);
    this.drain.begin(workerShutdownNotice(shutdownTimeout, 'A job still running after that is run again by another instance'));
    const drained = await this.drain.untilIdle(shutdownTimeout);
    if (!drained) {
      this.logger.error(
        `Deferred job(s) ${this.drain.running.join(', ')} of queue "${this.options.queueName}" still ran after shutdownTimeout ` +
          `(${shutdownTimeout} ms): the worker closes without them; another instance runs them again once their job lease ` +
          `(${this.options.jobLease} ms) lapses. Stop the work when lock.signal aborts, or raise shutdownTimeout.`,
      );
    }
    // After a drain, a normal close lets BullMQ record the outcome of the jobs that just ended (else they would
    // be run again); a forced one does not wait for jobs still running.
    const bound = Math.max(commandTimeout, shutdownTimeout - (monotonicNow() - startedAt));
    if (!(await settledWithin(worker.close(!drained), bound))) {
      this.logger.warn(
        `Defer worker "${this.options.queueName}" did not close within ${bound} ms (Redis unreachable?): its connections are closed now.`,
      );
    }
  }

  /** Shutdown, last step: the worker (if still open), enqueues in flight, then the queue and its connections, each bounded. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const { shutdownTimeout, commandTimeout } = this.limits;
      await this.closeWorker();
      // Each is bounded by commandTimeout already.
      await Promise.allSettled([...this.adding, ...this.recording]);
      if (!(await settledWithin(this.queue.close(), shutdownTimeout))) {
        this.logger.warn(
          `Defer queue "${this.options.queueName}" did not close within ${shutdownTimeout} ms (Redis unreachable?): its connections are closed now.`,
        );
      }
      await Promise.all(this.connections.map((c) => closeConnection(c, commandTimeout)));
    })();
    return this.closing;
  }

  private process(job: Job<DeferredJobData>, token: string | undefined, targets: DeferTargets, run: RunUnderLock): Promise<unknown> {
    const { drain, logger } = this;
    const jobId = job.id ?? '';
    return runDeferredJob({
      jobId,
      data: job.data,
      targets,
      run,
      drain,
      logger,
      giveBack: (ran) => this.giveBack(job, token, ran),
      beforeMethod: () => this.countRun(job.data.method, jobId),
    });
  }

  /**
   * Counts this run in the job (job-run-count.ts) and refuses it when `attempts` runs were started already
   * (failed or cut short alike): the job fails for good, not run again. Bounded by `commandTimeout`.
   */
  private async countRun(method: string, jobId: string): Promise<void> {
    const { commandTimeout } = this.limits;
    const { attempts, queueName } = this.options;
    const runs = await withDeadline(
      countJobRun(this.queue, this.queueConnection, jobId),
      commandTimeout,
      () =>
        new DistributedLockError(
          `Deferred ${method} (job ${jobId}): Redis did not answer within commandTimeout (${commandTimeout} ms) before the run; not run now.`,
        ),
    );
    if (runs === -1) {
      throw new this.bullmq.UnrecoverableError(
        `Deferred ${method} (job ${jobId}) was removed from queue "${queueName}" while waiting for its lock; not run.`,
      );
    }
    if (runs > attempts) {
      throw new this.bullmq.UnrecoverableError(
        `Deferred ${method} (job ${jobId}) was started ${runs - 1} time(s) already (failed or cut short by a worker that stopped), ` +
          `all of its attempts (${attempts}); not run again.`,
      );
    }
  }

  /**
   * A job this worker will not run after all (it is closing): back in the queue, due now, no attempt used.
   * Moved to the delayed set with no delay rather than with moveToWait/WaitingError: those came late in
   * BullMQ 5, and the peer range starts at 5.0.
   */
  private async giveBack(job: Job<DeferredJobData>, token: string | undefined, ran: boolean): Promise<never> {
    try {
      // A run stopped by its shutdown notice was counted (countRun): it uses no attempt.
      if (ran) await uncountJobRun(this.queue, this.queueConnection, job.id ?? '');
      await job.moveToDelayed(Date.now(), token);
    } catch (error) {
      // Redis unreachable: the job stays active until its lease lapses, then another worker runs it.
      this.logger.warn(`Deferred ${job.data.method} (job ${job.id}) could not be put back in the queue: ${(error as Error).message}`);
    }
    // Tells BullMQ the job was moved by the processor: nothing to record, no attempt used.
    throw new this.bullmq.DelayedError();
  }

  /**
   * A job's end: `lock.deferred` and `lock.defer.duration`, recorded together once the job's start is read
   * (job-deferred-at.ts: its enqueue, or the `deferKey` call that retried it after it failed for good; never the
   * time it sat failed). A start that cannot be read or is not known gives no duration sample; the end still counts.
   */
  private finished(job: Job<DeferredJobData>, targets: DeferTargets, outcome: 'completed' | 'failed'): void {
    const name = targets.metricName(job.data.method);
    const endedAt = Date.now();
    const { commandTimeout } = this.limits;
    const readStart = outcome === 'completed' ? deferredAtOfCompleted : deferredAtOfFailed;
    const reading = readStart(this.queue, this.queueConnection, job);
    const start = withDeadline(reading, commandTimeout, () => new Error('not read within commandTimeout')).catch(() => undefined);
    const recording = start.then((startedAt) => {
      this.metrics.deferred(name, outcome);
      if (startedAt !== undefined) this.metrics.deferDuration(name, outcome, Math.max(0, endedAt - startedAt));
    });
    this.recording.add(recording);
    void recording.finally(() => this.recording.delete(recording));
  }

  private connect(role: BullmqConnectionRole): Redis {
    const connection = this.track(bullmqConnection(this.redis, role, this.limits.commandTimeout));
    if (role === 'worker') {
      // BullMQ makes the worker's blocking connection with duplicate() and closes it with QUIT, which waits
      // as long as Redis is unreachable: tracked, so close() can end it within its bound.
      const duplicate = connection.duplicate.bind(connection);
      connection.duplicate = (...args: Parameters<Redis['duplicate']>) => this.track(duplicate(...args));
    }
    return connection;
  }

  /** Where the queue's keys go (see bullmqPrefix); left out for BullMQ's default, as no option at all. */
  private get prefix(): { prefix?: string } {
    const prefix = bullmqPrefix(this.redis);
    return prefix === undefined ? {} : { prefix };
  }

  private track(connection: Redis): Redis {
    this.connections.push(connection);
    return connection;
  }
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
