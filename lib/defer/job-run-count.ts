import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * How many times a job's method was started, kept as a field of the job's own BullMQ hash (so it goes with
 * the job). `attempts` bounds runs of every kind with it: BullMQ counts failures (`attemptsMade`) and runs
 * cut short by a worker that died (its stall counter) apart, each against `attempts`, so a job could run up
 * to 2 × attempts − 1 times. Counted under the lock right before the method runs: a give-back (the job left
 * while waiting for its lock) is no run.
 */
const JOB_RUNS_FIELD = 'nestjsDistributedLockRuns';

/** Adds one run; -1 when the job's hash is gone (the job was removed meanwhile: nothing is created). */
const COUNT_RUN_SCRIPT = `if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('HINCRBY', KEYS[1], ARGV[1], 1)`;

/**
 * Counts one more run of the job, over `client` (a connection of the queue's Redis); resolves to the runs so
 * far, this one included, or -1 for a job removed meanwhile.
 */
export async function countJobRun(queue: Queue, client: Redis, jobId: string): Promise<number> {
  return Number(await client.eval(COUNT_RUN_SCRIPT, 1, queue.toKey(jobId), JOB_RUNS_FIELD));
}

/** Takes back the run counted last: it was cut short at shutdown and the job goes back to the queue, no attempt used. */
const UNCOUNT_RUN_SCRIPT = `if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') > 0 then
  return redis.call('HINCRBY', KEYS[1], ARGV[1], -1)
end
return 0`;

export async function uncountJobRun(queue: Queue, client: Redis, jobId: string): Promise<void> {
  await client.eval(UNCOUNT_RUN_SCRIPT, 1, queue.toKey(jobId), JOB_RUNS_FIELD);
}

/**
 * A job given its attempts again starts its run count over: a job failed for good (whoever retries it then:
 * a deferKey's call, a dashboard's `job.retry()`), or before a deferKey's retry.
 */
export async function resetJobRuns(queue: Queue, client: Redis, jobId: string): Promise<void> {
  await client.hdel(queue.toKey(jobId), JOB_RUNS_FIELD);
}
