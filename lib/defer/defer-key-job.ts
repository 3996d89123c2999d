import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { restartDeferredAt } from './job-deferred-at';
import { resetJobRuns } from './job-run-count';

/**
 * Makes the job a `deferKey` names ready to stand for a new call, before the enqueue. BullMQ answers an
 * add with an existing job id by returning that job, whatever its state, which is what makes repeated
 * defers one job while it is pending, or completed within the window. Two states would make a repeat a
 * call that never runs:
 * - failed for good (the failed set keeps its id): the job is retried, with all its attempts again (BullMQ 6;
 *   BullMQ 5's retry takes no options and keeps the attempts used, so there it runs once more). It
 *   keeps its id and its history (earlier failures in its stacktrace) and runs with its first call's
 *   arguments; 'retried' tells the caller not to enqueue. Its `lock.defer.duration` starts now, with this
 *   call, not at its first enqueue (job-deferred-at.ts).
 * - completed longer ago than the window: BullMQ removes old completed jobs only when another job
 *   completes, so on a quiet queue the window never ended. Such a job is removed, then enqueued anew.
 */
export async function prepareDeferKeyJob(queue: Queue, client: Redis, jobId: string, windowMs: number): Promise<'retried' | 'enqueue'> {
  const state = await queue.getJobState(jobId);
  if (state === 'failed') {
    const job = await queue.getJob(jobId);
    if (!job) return 'enqueue'; // removed meanwhile
    try {
      // Its runs count from zero again (job-run-count.ts), before any worker can take it.
      await resetJobRuns(queue, client, jobId);
      await job.retry('failed', { resetAttemptsMade: true, resetAttemptsStarted: true });
    } catch (error) {
      // Another call retried it first (it is no longer in the failed set): the add below finds it.
      if ((await queue.getJobState(jobId)) === 'failed') throw error;
      return 'enqueue';
    }
    // After the retry, which took it out of the failed set: the worker's mark of its failure cannot land on this.
    // The job is retried whatever happens here, so the call must not be told it failed: at worst this run's
    // duration is not timed from now.
    await restartDeferredAt(queue, client, jobId, Date.now()).catch(() => undefined);
    return 'retried';
  }
  if (state === 'completed') {
    const job = await queue.getJob(jobId);
    if (job?.finishedOn !== undefined && Date.now() - job.finishedOn > windowMs) await queue.remove(jobId);
  }
  return 'enqueue';
}
