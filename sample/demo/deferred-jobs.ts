import { Queue } from 'bullmq';
import Redis from 'ioredis';
import { setTimeout as sleep } from 'timers/promises';

/** What became of the jobs behind a round's 202 answers, read from BullMQ itself (not from the app). */
export interface DeferredAudit {
  /** Distinct job ids the 202 answers carried. */
  jobs: number;
  /** Jobs that completed, by the outcome they returned (issued, sold-out, already-claimed). */
  outcomes: Record<string, number>;
  completed: number;
  /** Jobs in the failed set (dead letter), with their reasons. */
  failed: number;
  failedReasons: string[];
  /** Job ids that BullMQ does not know (enqueued, then lost). */
  missing: number;
  /** Jobs still waiting, active or delayed when the wait gave up. */
  pending: number;
  /** Jobs that needed more than one run (a stale-fence refusal or a lock wait that ran out, then retried). */
  retried: number;
  /** Every job finished before the deadline. */
  drained: boolean;
  /** From the first claim sent to the last job finished (BullMQ's finishedOn), in ms. */
  drainMs: number;
}

const POLL_MS = 100;

/**
 * Waits (at most `timeoutMs`) until every job of `jobIds` has finished, then reads each one: its state,
 * the outcome it returned, how many runs it took. `burstStartedAt` is the wall-clock start of the burst.
 */
export async function awaitDeferredJobs(
  redisUrl: string,
  queueName: string,
  jobIds: readonly string[],
  burstStartedAt: number,
  timeoutMs: number,
): Promise<DeferredAudit> {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null });
  const queue = new Queue(queueName, { connection });
  try {
    const ids = [...new Set(jobIds)];
    const deadline = Date.now() + timeoutMs;
    // One cheap call per poll: the queue's unfinished jobs (the demo's queue holds only its own).
    const unfinished = async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
      return Object.values(c).reduce((a, b) => a + b, 0);
    };
    while ((await unfinished()) > 0 && Date.now() < deadline) await sleep(POLL_MS);
    const states = await Promise.all(ids.map((id) => queue.getJobState(id)));
    const jobs = await Promise.all(ids.map((id) => queue.getJob(id)));
    const audit: DeferredAudit = {
      jobs: ids.length,
      outcomes: {},
      completed: 0,
      failed: 0,
      failedReasons: [],
      missing: 0,
      pending: 0,
      retried: 0,
      drained: false,
      drainMs: 0,
    };
    let lastFinished = burstStartedAt;
    jobs.forEach((job, i) => {
      const state = states[i];
      if (!job || state === 'unknown') return void audit.missing++;
      if (job.attemptsMade > 1) audit.retried++;
      if (job.finishedOn) lastFinished = Math.max(lastFinished, job.finishedOn);
      if (state === 'completed') {
        audit.completed++;
        const outcome = (job.returnvalue as { outcome?: string } | null)?.outcome ?? 'no outcome';
        audit.outcomes[outcome] = (audit.outcomes[outcome] ?? 0) + 1;
      } else if (state === 'failed') {
        audit.failed++;
        audit.failedReasons.push(`job ${job.id}: ${job.failedReason}`);
      } else audit.pending++;
    });
    audit.drained = audit.pending === 0 && audit.missing === 0;
    audit.drainMs = lastFinished - burstStartedAt;
    return audit;
  } finally {
    await queue.close();
    await connection.quit().catch(() => connection.disconnect());
  }
}
