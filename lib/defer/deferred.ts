/**
 * What a `@Locked(…, { onBusy: 'defer' })` method resolves to when its key was busy: the call was not run
 * here but stored as a durable job that a worker runs later under the same lock. The method's declared
 * result must admit it (`Promise<T | Deferred>`), so callers tell "ran" from "deferred" with `instanceof`.
 * In an HTTP handler the answer is 202 Accepted with this object as JSON.
 */
export class Deferred {
  readonly status = 'deferred' as const;

  constructor(
    /** BullMQ job id: the same for repeated defers of one logical call when `deferKey` is set. */
    readonly jobId: string,
    /** `ProviderClass.method` of the deferred call: the class of the instance that deferred it, even for a method it inherits. */
    readonly method: string,
    /** Queue holding the job. */
    readonly queue: string,
  ) {}

  toJSON(): { status: 'deferred'; jobId: string; method: string; queue: string } {
    return { status: this.status, jobId: this.jobId, method: this.method, queue: this.queue };
  }
}
