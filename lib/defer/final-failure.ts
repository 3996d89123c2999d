import type { Job } from 'bullmq';

/**
 * Whether a 'failed' event of the worker is the job's end (it is now in BullMQ's failed set) rather than
 * a retry. Attempts left do not tell: BullMQ also fails a job for good without using them (a job stalled
 * more often than `maxStalledCount`, an UnrecoverableError). BullMQ sets `finishedOn` only when it moves
 * the job to the failed set; a value from an earlier life of the job (a failed job retried) predates this run.
 */
export function isFinalFailure(job: Job, error: Error): boolean {
  if (error.name === 'UnrecoverableError') return true;
  if (typeof job.finishedOn === 'number' && job.finishedOn >= (job.processedOn ?? 0)) return true;
  return job.attemptsMade >= (job.opts.attempts ?? 1);
}
