import { decodeDeferredArguments } from '../defer/defer-arguments';
import type { DeferredJobData } from '../defer/deferred-job-run';
import type { DeferredJobSnapshot, DeferredJobState } from './deferred-job-snapshot';

/** One job of the in-memory defer queue: what BullMQ keeps of a job in Redis, kept in an object. */
export class MemoryDeferredJob {
  state: DeferredJobState = 'waiting';
  attemptsMade = 0;
  /** Date.now() at the end of its last run that finished it (completed or failed for good). */
  finishedOn?: number;
  result?: unknown;
  failedReason?: string;
  /**
   * Date.now() when the job began standing for its call: its enqueue, or the `deferKey` call that retried it
   * after it failed for good (as lib/defer/job-deferred-at.ts keeps it on BullMQ). The start of `lock.defer.duration`.
   */
  deferredAt = Date.now();

  constructor(
    readonly id: string,
    readonly data: DeferredJobData,
  ) {}

  get finished(): boolean {
    return this.state === 'completed' || this.state === 'failed';
  }

  snapshot(): DeferredJobSnapshot {
    const { id, state, attemptsMade, result, failedReason } = this;
    return {
      id,
      method: this.data.method,
      args: decodeDeferredArguments(structuredClone(this.data)),
      state,
      attemptsMade,
      ...(state === 'completed' ? { result: structuredClone(result) } : {}),
      ...(failedReason === undefined ? {} : { failedReason }),
    };
  }
}
