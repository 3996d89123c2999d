/** `defer` of `DistributedLockModule.forRoot`: the BullMQ queue behind `@Locked(…, { onBusy: 'defer' })`. */
export interface DeferModuleOptions {
  /** BullMQ queue name (its keys live under BullMQ's `bull:` prefix in the same Redis). @default 'distributed-lock-deferred' */
  queueName?: string;
  /** Jobs this instance's worker runs at once. Integer 1 … 1000. @default 1 */
  concurrency?: number;
  /** Run a worker on this instance; `false` on instances that only enqueue. @default true */
  worker?: boolean;
  /**
   * Runs of one job before it lands in the failed set: a busy key, a throwing method and a run cut short by a
   * worker that stopped (killed mid-job) each use one. Integer 1 … 1000. @default 5
   */
  attempts?: number;
  /** Delay before a retry in ms, doubled at each attempt (BullMQ exponential backoff). Integer 0 … 2,147,483,647. @default 1000 */
  backoff?: number;
  /**
   * How long a worker's claim on a running job lasts between its renewals (BullMQ `lockDuration`; stalled jobs are
   * looked for as often). A worker killed mid-job has its job run again by another worker after about this long, while
   * `attempts` allow: delivery is at-least-once, so fence what the method writes (`currentLock().fencingToken`).
   * Integer 100 … 2,147,483,647.
   * @default 30000
   */
  jobLease?: number;
}

/** DeferModuleOptions after defaults and validation. */
export type ResolvedDeferOptions = Required<DeferModuleOptions>;
