/**
 * What one history worker does (T12, T15): passed as JSON in its environment by the parent, which
 * draws it from a fast-check arbitrary. Plain data, shared by the worker and the parent.
 */
import type { Policy } from '../../../harness/event-history/events';

export interface ServicePlan {
  /** The worker's Redis: the proxy, or Redis itself. */
  url: string;
  keyPrefix: string;
  ttl: number;
  commandTimeout: number;
  waiterLease: number;
  shutdownTimeout: number;
}

/** The mix of calls a worker makes: drawn once per workload, handed to every worker unchanged. */
export interface CallMix {
  /** Share of single-key calls on a hot key (the rest on cold keys, if any). */
  hotShare: number;
  /** Key sets taken together (their order shuffled per call: the library must sort them). */
  multis: string[][];
  /** Share of acquisitions on a multi-key set. */
  multiShare: number;
  /** Weights of 'retry', 'throw', 'fail-fast'. */
  policyWeights: [number, number, number];
  /** waitTimeout of most 'retry' calls. */
  waitMs: number;
  /** A share of 'retry' calls waits only this long: they time out in the queue. */
  shortWaitMs: number;
  shortWaitShare: number;
  /** A body lasts a random 0 … bodyMaxMs ms (0: one macrotask). */
  bodyMaxMs: number;
  /** Share of sections run through withLock (the rest: acquire + release). */
  withLockShare: number;
  /** Share of withLock bodies that take (some of) their keys again through a nested withLock. */
  nestedShare: number;
}

export interface WorkerPlan extends CallMix {
  /** Name of this process incarnation in the history (a restarted worker gets a new one). */
  worker: string;
  seed: number;
  /** Top-level sections to complete before stopping. */
  sections: number;
  /** Concurrent lanes (async loops) in the process, sharing its one LockService. */
  lanes: number;
  /** Keys taken alone: hot ones (also in the multi-key sets) and cold ones (only alone). */
  hot: string[];
  cold: string[];
  /** Section counts at which the worker calls close() on its service mid-hold, then starts a new one. */
  closeAt: number[];
  service: ServicePlan;
  /** Negative control: no lock at all (every acquisition succeeds at once). */
  bypass?: boolean;
}

export const POLICIES: readonly Policy[] = ['retry', 'throw', 'fail-fast'];
