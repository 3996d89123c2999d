import { AsyncResource } from 'node:async_hooks';
import { encodeDeferredArguments } from '../defer/defer-arguments';
import type { DeferJobQueue, DeferQueueContext, RunUnderLock } from '../defer/defer-job-queue';
import { DEFER_KEY_WINDOW_MS, deferKeyJobId } from '../defer/defer-key-job-id';
import { Deferred } from '../defer/deferred';
import { runDeferredJob, type DeferredJobData } from '../defer/deferred-job-run';
import type { DeferTarget } from '../defer/defer-target';
import type { DeferTargets } from '../defer/defer-targets';
import { deferredMetricName } from '../defer/deferred-methods';
import { JobDrain, workerShutdownNotice } from '../defer/job-drain';
import { DistributedLockError } from '../errors/distributed-lock.error';
import type { DeferredJobSnapshot } from './deferred-job-snapshot';
import { MemoryDeferredJob } from './memory-deferred-job';

/** What a run resolves to when the job went back to the queue instead (the worker is closing). */
const GIVEN_BACK = Symbol('given-back');

/**
 * The defer queue of the testing module: BullMQ's job life in process, for `@Locked(…, { onBusy: 'defer' })`
 * under test. An enqueue answers `Deferred` at once; the worker takes jobs first come first, `concurrency`
 * at a time, and runs each through the same code as production's worker (lib/defer/deferred-job-run.ts:
 * the method under its lock with 'retry', results kept as JSON). A failed run is retried after `backoff`,
 * doubled each time, until `attempts` runs failed; `deferKey` makes repeated defers one job as BullMQ's job
 * ids do (pending, running or completed within the window: that job; failed for good: retried). Nothing is
 * durable: jobs end with the module.
 */
export class MemoryDeferQueue implements DeferJobQueue {
  private readonly jobs = new Map<string, MemoryDeferredJob>();
  private readonly waiting: MemoryDeferredJob[] = [];
  /** Backoff timers of failed runs, by job: cleared at close, so nothing outlives the module. */
  private readonly delays = new Map<MemoryDeferredJob, NodeJS.Timeout>();
  private readonly drain = new JobDrain();
  /** Called whenever a job finishes or the queue closes: waits of deferredJobsSettled(). */
  private readonly settleWatchers = new Set<() => void>();
  /**
   * The async context of the module's startup: jobs run in it, as a worker's do, never in the context of
   * the call that deferred them (whose locks would otherwise count as held by the job: reentrancy).
   */
  private readonly workerScope = new AsyncResource('DistributedLockTesting.deferWorker');
  private worker?: { targets: DeferTargets; run: RunUnderLock };
  private active = 0;
  private nextId = 1;
  private workerClosing?: Promise<void>;
  private workerStopped = false;
  private closing?: Promise<void>;

  constructor(private readonly context: DeferQueueContext) {}

  get closed(): boolean {
    return this.closing !== undefined;
  }

  enqueue(target: DeferTarget, args: readonly unknown[], deferKey?: readonly string[]): Promise<Deferred> {
    const { settings, metrics } = this.context;
    const { name, method } = target;
    if (this.closing) {
      return Promise.reject(
        new DistributedLockError(`The defer queue "${settings.queueName}" is closed (application shutdown): ${name} was not enqueued.`),
      );
    }
    let job: MemoryDeferredJob;
    try {
      // Stored as JSON, as BullMQ stores it: the job gets a copy, not the caller's objects.
      const data = JSON.parse(JSON.stringify({ method: name, ...encodeDeferredArguments(args, method.where).data })) as DeferredJobData;
      job = deferKey ? this.jobForDeferKey(deferKeyJobId(name, deferKey), data) : this.add(String(this.nextId++), data);
    } catch (error) {
      return Promise.reject(error);
    }
    metrics.deferred(deferredMetricName(method), 'enqueued');
    this.workerScope.runInAsyncScope(() => this.pump());
    return Promise.resolve(new Deferred(job.id, name, settings.queueName));
  }

  /** The job a deferKey names, made ready to stand for a new call as lib/defer/defer-key-job.ts does on BullMQ. */
  private jobForDeferKey(id: string, data: DeferredJobData): MemoryDeferredJob {
    const job = this.jobs.get(id);
    if (job?.state === 'failed') {
      // Failed for good: retried with all its attempts again, its first call's arguments and its last failure kept.
      job.attemptsMade = 0;
      job.finishedOn = undefined;
      job.deferredAt = Date.now();
      this.toWaiting(job);
      return job;
    }
    if (job?.state === 'completed' && Date.now() - job.finishedOn! > DEFER_KEY_WINDOW_MS) this.jobs.delete(id);
    return this.jobs.get(id) ?? this.add(id, data);
  }

  private add(id: string, data: DeferredJobData): MemoryDeferredJob {
    const job = new MemoryDeferredJob(id, data);
    this.jobs.set(id, job);
    this.waiting.push(job);
    return job;
  }

  startWorker(targets: DeferTargets, run: RunUnderLock): void {
    this.worker = { targets, run };
    this.workerScope.runInAsyncScope(() => this.pump());
  }

  /** A settled() wait ended: once none is left, backoff timers no longer keep the process alive. */
  private unwatch(check: () => void): void {
    this.settleWatchers.delete(check);
    if (this.settleWatchers.size === 0) for (const timer of this.delays.values()) timer.unref();
  }

  /** Jobs of this queue, oldest first. */
  snapshots(): DeferredJobSnapshot[] {
    return [...this.jobs.values()].map((job) => job.snapshot());
  }

  /**
   * Resolves once every job queued so far has completed or failed for good, with their snapshots. Rejects
   * when some of them will never run here: no worker (`defer.worker: false`), or its worker closed (app.close()).
   */
  settled(): Promise<DeferredJobSnapshot[]> {
    const jobs = [...this.jobs.values()];
    return new Promise((resolve, reject) => {
      const check = () => {
        const pending = jobs.filter((job) => !job.finished);
        if (pending.length === 0) {
          this.unwatch(check);
          return resolve(jobs.map((job) => job.snapshot()));
        }
        const why = this.workerStopped
          ? 'the module closed its worker'
          : this.context.settings.worker
            ? undefined
            : 'this module runs no worker (defer.worker: false)';
        if (why === undefined) return;
        this.unwatch(check);
        const ids = pending.map((job) => `${job.id} (${job.data.method}, ${job.state})`).join(', ');
        reject(new DistributedLockError(`Deferred job(s) ${ids} will not run: ${why}.`));
      };
      this.settleWatchers.add(check);
      // While someone awaits the jobs, their backoff keeps the process alive: a plain script awaiting
      // deferredJobsSettled() exited during a retry's backoff, its await never answered.
      for (const timer of this.delays.values()) timer.ref();
      check();
    });
  }

  /** Starts waiting jobs while the worker has room; each run makes room again when it ends. */
  private pump(): void {
    const worker = this.worker;
    if (!worker || this.workerClosing) return;
    while (this.active < this.context.settings.concurrency && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      job.state = 'active';
      this.active++;
      void this.process(job, worker.targets, worker.run).finally(() => {
        this.active--;
        this.pump();
      });
    }
  }

  private async process(job: MemoryDeferredJob, targets: DeferTargets, run: RunUnderLock): Promise<void> {
    const { drain } = this;
    const { logger } = this.context;
    let result: unknown;
    try {
      result = await runDeferredJob({ jobId: job.id, data: job.data, targets, run, drain, logger, giveBack: () => this.giveBack(job) });
    } catch (error) {
      return this.failed(job, error as Error);
    }
    if (result !== GIVEN_BACK) this.completed(job, result);
  }

  /** Back to the head of the line, no attempt used (the worker is closing; nothing takes it any more). */
  private giveBack(job: MemoryDeferredJob): Promise<typeof GIVEN_BACK> {
    job.state = 'waiting';
    this.waiting.unshift(job);
    return Promise.resolve(GIVEN_BACK);
  }

  private completed(job: MemoryDeferredJob, result: unknown): void {
    job.attemptsMade++;
    // Kept as JSON, as BullMQ keeps a return value (runDeferredJob made sure JSON can hold it).
    job.result = result === undefined ? null : (JSON.parse(JSON.stringify(result)) as unknown);
    this.finished(job, 'completed');
  }

  private failed(job: MemoryDeferredJob, error: Error): void {
    const { settings, metrics, logger } = this.context;
    job.attemptsMade++;
    job.failedReason = error.message;
    // BullMQ fails a job for good, whatever attempts are left, when its error is named UnrecoverableError (final-failure.ts).
    if (error.name !== 'UnrecoverableError' && job.attemptsMade < settings.attempts) {
      metrics.deferred(this.metricName(job), 'retried');
      return this.delay(job, settings.backoff * 2 ** (job.attemptsMade - 1));
    }
    this.finished(job, 'failed');
    logger.error(
      `Deferred ${job.data.method} (job ${job.id}) failed for good: ${error.message} (${job.attemptsMade} attempt(s) started); ` +
        `it stays failed in queue "${settings.queueName}" of the testing module.`,
    );
  }

  /** Waits out the backoff, as a job in BullMQ's delayed set does, then queues again at the back of the line. */
  private delay(job: MemoryDeferredJob, ms: number): void {
    job.state = 'delayed';
    const timer = setTimeout(
      () =>
        this.workerScope.runInAsyncScope(() => {
          this.delays.delete(job);
          this.toWaiting(job);
          this.pump();
        }),
      ms,
    );
    // No timer of the library keeps the process alive, unless deferredJobsSettled() is awaited (settled()); close() clears it anyway.
    if (this.settleWatchers.size === 0) timer.unref();
    this.delays.set(job, timer);
  }

  private toWaiting(job: MemoryDeferredJob): void {
    job.state = 'waiting';
    this.waiting.push(job);
  }

  private finished(job: MemoryDeferredJob, outcome: 'completed' | 'failed'): void {
    const { metrics } = this.context;
    job.state = outcome;
    job.finishedOn = Date.now();
    const name = this.metricName(job);
    metrics.deferred(name, outcome);
    metrics.deferDuration(name, outcome, Math.max(0, job.finishedOn - job.deferredAt));
    this.tellSettleWatchers();
  }

  /** As BullMQ's worker names a job's metrics: by its method when this worker runs it, else by the job's name. */
  private metricName(job: MemoryDeferredJob): string {
    return this.worker?.targets.metricName(job.data.method) ?? job.data.method;
  }

  private tellSettleWatchers(): void {
    for (const check of [...this.settleWatchers]) check();
  }

  /**
   * Shutdown, first step, as BullmqDeferQueue.closeWorker: no new job; a run still waiting for its lock goes
   * back to the queue; runs under their lock are told through its signal and waited for, up to shutdownTimeout.
   */
  closeWorker(): Promise<void> {
    this.workerClosing ??= this.stopWorker().finally(() => {
      // Runs ended or given up on: a job not finished now will not run any more; whoever awaits it is told.
      this.workerStopped = true;
      this.tellSettleWatchers();
    });
    return this.workerClosing;
  }

  private async stopWorker(): Promise<void> {
    if (!this.worker) return;
    const { limits, settings, logger } = this.context;
    const { shutdownTimeout } = limits;
    this.drain.begin(
      workerShutdownNotice(shutdownTimeout, 'A job still running after that is left running (in production, another instance runs it again)'),
    );
    if (!(await this.drain.untilIdle(shutdownTimeout))) {
      logger.error(
        `Deferred job(s) ${this.drain.running.join(', ')} of queue "${settings.queueName}" still ran after shutdownTimeout ` +
          `(${shutdownTimeout} ms): the worker closes without them (in production, another instance runs them again once their ` +
          `job lease lapses). Stop the work when lock.signal aborts, or raise shutdownTimeout.`,
      );
    }
  }

  /** Shutdown, last step: the worker (if still open), then the backoff timers; jobs not finished end with the module. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      await this.closeWorker();
      for (const timer of this.delays.values()) clearTimeout(timer);
      this.delays.clear();
      // An async resource counts as open (jest --detectOpenHandles) until it says it is gone.
      this.workerScope.emitDestroy();
    })();
    return this.closing;
  }
}
