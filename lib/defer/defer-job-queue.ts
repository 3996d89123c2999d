import type { Logger } from '@nestjs/common';
import type { Lock } from '../core/lock';
import type { LockMetrics } from '../observability/lock-metrics';
import type { DistributedLockModuleOptions } from '../options/distributed-lock-module-options.interface';
import type { ResolvedDeferOptions } from '../options/defer-options.interface';
import type { DeferQueue } from './defer-queue';
import type { DeferTarget } from './defer-target';
import type { DeferTargets } from './defer-targets';

/**
 * How the worker takes a target's lock: the application's `withLock` with the method's options and 'retry',
 * around `body`, which runs the method (or nothing, when the job left while waiting for the lock).
 */
export type RunUnderLock = (target: DeferTarget, args: unknown[], body: (lock: Lock) => Promise<unknown>) => Promise<unknown>;

/** The lock module's bounds, applied to the queue's calls too. */
export interface DeferLimits {
  /** Bound of an enqueue (module `commandTimeout`). */
  readonly commandTimeout: number;
  /** Bound of the worker's drain and of the queue's close (module `shutdownTimeout`). */
  readonly shutdownTimeout: number;
}

/**
 * What LockDeferCoordinator drives: the queue the `@Locked` wrapper enqueues on, this instance's worker,
 * and their shutdown. Durable over BullMQ in production (bullmq-defer-queue.ts), in process in the testing
 * module (lib/testing/memory-defer-queue.ts); validation, startup checks and the shutdown order are the
 * coordinator's, the same for both.
 */
export interface DeferJobQueue extends DeferQueue {
  /** Starts this instance's worker over the deferring methods found at startup (by job name: `ProviderClass.method`). */
  startWorker(targets: DeferTargets, run: RunUnderLock): void;
  /** Shutdown, first step: no new job; waiting runs go back, running ones are told and waited for (bounded by shutdownTimeout). */
  closeWorker(): Promise<void>;
  /** Shutdown, last step: the worker if still open, enqueues in flight, then the queue itself (`closed` from the start). */
  close(): Promise<void>;
}

/** What a queue is made from: the module's options as given and as resolved, and the lock service's bounds, metrics and logger. */
export interface DeferQueueContext {
  readonly settings: ResolvedDeferOptions;
  readonly options: DistributedLockModuleOptions;
  readonly limits: DeferLimits;
  readonly metrics: LockMetrics;
  readonly logger: Logger;
}

/** Makes the queue of a lock module that has a `defer` option. */
export interface DeferQueueFactory {
  /** The module whose `forRoot` takes the `defer` option, named when a deferring method finds none. */
  readonly moduleName: string;
  create(context: DeferQueueContext): DeferJobQueue;
}

/** Nest token of the queue factory a lock module gives its coordinator (absent: BullMQ). */
export const DEFER_QUEUE_FACTORY = 'DistributedLock:deferQueueFactory';
