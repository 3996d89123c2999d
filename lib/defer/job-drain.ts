import type { Lock } from '../core/lock';
import { LockLostError } from '../errors/lock-lost.error';
import { IdleWait } from '../time/idle-wait';
import { causedByShutdown } from './shutdown-cause';

/**
 * One job's run on this instance's worker: it waits for its lock, then runs the method under it. When the
 * worker starts closing, a run still waiting leaves (`left` resolves; the job goes back to the queue) and
 * a run under its lock is told through the lock's signal.
 */
export class JobRun {
  /** Resolves when the worker starts closing while this run still waits for its lock. */
  readonly left: Promise<void>;
  private leave!: () => void;
  private hasLeft = false;
  private lock?: Lock;

  constructor(
    readonly jobId: string,
    private readonly drain: JobDrain,
  ) {
    this.left = new Promise<void>((resolve) => (this.leave = resolve));
  }

  /** The worker started closing while this run still waited for its lock: whatever that wait ends with, the method did not run. */
  get leftBeforeLock(): boolean {
    return this.hasLeft;
  }

  /** The lock was granted: true to run the method under it, false when the run left meanwhile (not run). */
  enter(lock: Lock): boolean {
    if (this.hasLeft || this.drain.draining) return false;
    this.lock = lock;
    return true;
  }

  /** @internal The worker starts closing. */
  drainBegins(notice: (lock: Lock) => LockLostError): void {
    if (this.lock) return this.lock.noticeShutdown(notice(this.lock));
    this.hasLeft = true;
    this.leave();
  }

  /**
   * Whether the method stopped because this instance is shutting down, not because the work failed. Either it
   * threw its lock's shutdown reason, as is (`signal.throwIfAborted()`, an abortable call given the signal) or
   * as the `cause` of another error (the AbortError of `timers/promises`); or, once the worker drains, it
   * ended with an error the shutdown caused (shutdown-cause.ts): a nested `@Locked` call refused with
   * `LockServiceClosedError` because the lock service's drain began, another held lock's shutdown notice,
   * each as is or as a `cause`. The work could not go on here only because this instance is stopping; on
   * another it would. Such a run was cut short, not failed: the job goes back to the queue like one whose
   * worker stopped, with no attempt used. Only a run that entered its lock: one ended while still waiting
   * for it did not run, and counted no run to take back (see leftBeforeLock).
   */
  stoppedForShutdown(error: unknown): boolean {
    if (!this.lock) return false;
    if (this.drain.draining && causedByShutdown(error)) return true;
    const signal = this.lock.signal;
    const reason: unknown = signal.aborted ? signal.reason : undefined;
    if (!(reason instanceof LockLostError) || reason.reason !== 'shutdown') return false;
    // Not `instanceof Error`: Node's own AbortError may come from another realm (a test runner's vm).
    return error === reason || (typeof error === 'object' && error !== null && (error as { cause?: unknown }).cause === reason);
  }

  end(): void {
    this.drain.ended(this);
  }
}

/**
 * The runs of this instance's worker, for its shutdown: the worker's own close() waits for its jobs without
 * a bound and without telling them, while LockService.close() (which tells held locks and bounds the wait by
 * `shutdownTimeout`) runs only after it. So the worker's close tells its runs itself and bounds the wait.
 */
export class JobDrain {
  private readonly runs = new Set<JobRun>();
  private readonly idleWait = new IdleWait();
  private notice?: (lock: Lock) => Error;

  get draining(): boolean {
    return this.notice !== undefined;
  }

  /** Job ids of the runs not ended yet. */
  get running(): string[] {
    return [...this.runs].map((r) => r.jobId);
  }

  start(jobId: string): JobRun {
    const run = new JobRun(jobId, this);
    this.runs.add(run);
    return run;
  }

  /** Runs under their lock get `notice(lock)` on their signal; runs still waiting for their lock leave. */
  begin(notice: (lock: Lock) => LockLostError): void {
    if (this.notice) return;
    this.notice = notice;
    for (const run of this.runs) run.drainBegins(notice);
  }

  /** Resolves true once every run ended, false if `ms` passed first. */
  untilIdle(ms: number): Promise<boolean> {
    return this.idleWait.until(() => this.runs.size === 0, ms);
  }

  /** @internal */
  ended(run: JobRun): void {
    if (this.runs.delete(run)) this.idleWait.changed();
  }
}

/**
 * What a job running under its lock is told when its worker starts closing: its lock's signal aborts with
 * this LockLostError (reason 'shutdown'), as LockService.close() tells direct calls. `afterwards`: what
 * becomes of a job still running after `shutdownTimeout`, which depends on what keeps the queue.
 */
export function workerShutdownNotice(shutdownTimeout: number, afterwards: string): (lock: Lock) => LockLostError {
  return (lock) =>
    new LockLostError(
      lock.key,
      'shutdown',
      `the application is shutting down and the worker running this deferred job is closing; finish or stop the job within ` +
        `shutdownTimeout (${shutdownTimeout} ms). ${afterwards}`,
    );
}
