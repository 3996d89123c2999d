import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * When a job began standing for the call it runs for now: the start of `lock.defer.duration`. BullMQ's
 * `job.timestamp` (its add) is that only until the job fails for good: a retried job keeps its id and its
 * timestamp, so a duration measured from it counted the time the job sat in the failed set. Kept as a field
 * of the job's own BullMQ hash (it goes with the job), as job-run-count.ts keeps its runs:
 * - absent: never failed for good, the job began at `job.timestamp`;
 * - ms since the epoch: a `deferKey`'s call retried it then (defer-key-job.ts);
 * - UNKNOWN: failed for good, then (if at all) retried by someone the library does not hear from (a dashboard's
 *   `job.retry()`): when its present run began is not known, so its end gives no duration sample.
 */
const DEFERRED_AT_FIELD = 'nestjsDistributedLockDeferredAt';
const UNKNOWN = 'unknown';

/**
 * Reads the start and, while the job is still in the failed set, marks it UNKNOWN, in one step: a `deferKey`'s
 * call retries a job (taking it out of the failed set) before it sets the new start, so this never overwrites one.
 */
const END_SCRIPT = `local at = redis.call('HGET', KEYS[1], ARGV[1])
if redis.call('ZSCORE', KEYS[2], ARGV[2]) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return at`;

/** Sets the start, unless the job's hash is gone (removed meanwhile): nothing is created. */
const RESTART_SCRIPT = `if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])`;

/** When the completed `job` began standing for its call (ms since the epoch); undefined when not known. */
export async function deferredAtOfCompleted(queue: Queue, client: Redis, job: Job): Promise<number | undefined> {
  return startOf(job, await client.hget(queue.toKey(job.id ?? ''), DEFERRED_AT_FIELD));
}

/**
 * As deferredAtOfCompleted, for a job that just failed for good; whoever retries it from now on sets the start
 * of its next run (restartDeferredAt), or leaves it unknown.
 */
export async function deferredAtOfFailed(queue: Queue, client: Redis, job: Job): Promise<number | undefined> {
  const jobId = job.id ?? '';
  const at = (await client.eval(END_SCRIPT, 2, queue.toKey(jobId), queue.toKey('failed'), DEFERRED_AT_FIELD, jobId, UNKNOWN)) as string | null;
  return startOf(job, at);
}

/** A `deferKey`'s call retried the job failed for good, just now: its next end is timed from `at`. */
export async function restartDeferredAt(queue: Queue, client: Redis, jobId: string, at: number): Promise<void> {
  await client.eval(RESTART_SCRIPT, 1, queue.toKey(jobId), DEFERRED_AT_FIELD, String(at));
}

function startOf(job: Job, field: string | null): number | undefined {
  if (field === null) return job.timestamp;
  const at = Number(field);
  return field === UNKNOWN || !Number.isFinite(at) ? undefined : at;
}
