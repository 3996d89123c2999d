/** Where a deferred job stands, in BullMQ's words: waiting for the worker, waiting out its backoff, running, or finished. */
export type DeferredJobState = 'waiting' | 'delayed' | 'active' | 'completed' | 'failed';

/** A deferred job of the testing module as a test sees it (`LockTestingController.deferredJobs()`): a copy, taken when asked. */
export interface DeferredJobSnapshot {
  /** `Deferred.jobId` of the calls it stands for. */
  readonly id: string;
  /** `ProviderClass.method`: the class of the instance that deferred the call (docs/defer.md), as `Deferred.method`. */
  readonly method: string;
  /** The arguments the method runs with: a JSON copy of the first call's, as a job stores them. */
  readonly args: readonly unknown[];
  readonly state: DeferredJobState;
  /** Runs ended so far (a failed run waiting out its backoff counts). */
  readonly attemptsMade: number;
  /** `'completed'`: the method's result as the job keeps it (a JSON copy; `null` for a value JSON cannot hold). */
  readonly result?: unknown;
  /** Why the last run failed, as `Name: message` (`'TypeError: boom'`, `'LockTimeoutError: …'`). */
  readonly failedReason?: string;
}
