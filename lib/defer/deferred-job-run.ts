import type { Logger } from '@nestjs/common';
import { decodeDeferredArguments, type EncodedArguments } from './defer-arguments';
import type { RunUnderLock } from './defer-job-queue';
import type { DeferTarget } from './defer-target';
import type { DeferTargets } from './defer-targets';
import type { JobDrain } from './job-drain';
import { storableResult } from './storable-result';

/** What a job carries: its name (`ProviderClass.method`, see defer-target.ts) and the method's arguments (JSON). */
export interface DeferredJobData extends EncodedArguments {
  readonly method: string;
}

/** One job handed to this instance's worker, and what its queue does with a job the worker will not run after all. */
export interface DeferredJobRun {
  readonly jobId: string;
  readonly data: DeferredJobData;
  readonly targets: DeferTargets;
  readonly run: RunUnderLock;
  readonly drain: JobDrain;
  readonly logger: Logger;
  /**
   * The worker is closing and the method did not run (`ran` false), or stopped on its shutdown notice (`ran`
   * true: what beforeMethod counted is taken back): the job goes back to its queue, no attempt used.
   */
  giveBack(ran: boolean): Promise<unknown>;
  /** Runs under the lock right before the method; a rejection stops the run and fails the job with that error. */
  beforeMethod?(): Promise<void>;
}

/** What a run resolves to when it left while waiting for its lock (the worker started closing): the method did not run. */
const NOT_RUN = Symbol('not-run');

/**
 * Runs one job on this instance's worker, whatever keeps the queue (BullMQ, or the testing module's memory):
 * the method, on its singleton instance, under its lock taken with 'retry'. Resolves to the result to keep
 * (JSON-storable: a method that ran must not fail its job afterwards, or it would run again); rejects with
 * the method's error as `Name: message`, since a failed job keeps the message only. A job fetched as the
 * worker started closing, still waiting for its lock then, or stopped by its shutdown notice, is given back instead.
 */
export async function runDeferredJob(job: DeferredJobRun): Promise<unknown> {
  const { data, targets, drain } = job;
  let target: DeferTarget;
  try {
    target = targets.resolve(data.method);
  } catch (error) {
    throw jobFailure(error);
  }
  // Fetched as the worker started closing: not started, so back to the queue for another instance.
  if (drain.draining) return job.giveBack(false);
  const jobRun = drain.start(job.jobId);
  try {
    const args = decodeDeferredArguments(data);
    const method = (): unknown => Reflect.apply(target.method.original, target.instance, args);
    const running = job.run(target, args, (lock) => {
      if (!jobRun.enter(lock)) return Promise.resolve(NOT_RUN);
      return job.beforeMethod ? job.beforeMethod().then(method) : Promise.resolve(method());
    });
    let result: unknown;
    try {
      result = await Promise.race([running, jobRun.left.then(() => NOT_RUN)]);
    } catch (error) {
      // Stopped because this instance is shutting down (told so, or a nested lock call refused by the lock
      // service's drain): cut short, not failed. Back to the queue for another instance, no attempt used.
      if (jobRun.stoppedForShutdown(error)) return await job.giveBack(true);
      // Its wait was ended by the lock service's drain (LockServiceClosedError) before `left` won the race: not run either.
      if (jobRun.leftBeforeLock) return await job.giveBack(false);
      throw jobFailure(error);
    }
    if (result === NOT_RUN) {
      // Still waiting for its lock when the worker started closing. The wait goes on in the lock service
      // until it ends (a grant then runs nothing and is released); the job leaves now.
      running.catch(() => undefined);
      return await job.giveBack(false);
    }
    // The method ran: from here on nothing may fail the job (a failed job is run again).
    return storableResult(result, data.method, job.jobId, job.logger);
  } finally {
    jobRun.end();
  }
}

/** A failed job keeps the message only: `Name: message`, so its reason still says what kind of error it was. */
function jobFailure(error: unknown): Error {
  const e = error instanceof Error ? error : new Error(String(error));
  return Object.assign(new Error(`${e.name}: ${e.message}`), { name: e.name });
}
