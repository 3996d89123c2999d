import type { DeferTarget } from './defer-target';
import type { Deferred } from './deferred';

/**
 * What the `@Locked` wrapper needs of the queue: enqueue one call, and whether it still can. Implemented over BullMQ
 * (bullmq-defer-queue.ts) and, for the testing module, in memory (lib/testing/memory-defer-queue.ts).
 */
export interface DeferQueue {
  /**
   * `target`: the method and the instance that deferred the call, its job named after that instance's class.
   * `deferKey`: the method's resolved deferKey (resolved by the caller, with the method's `this`), if it has one.
   */
  enqueue(target: DeferTarget, args: readonly unknown[], deferKey?: readonly string[]): Promise<Deferred>;
  /** Closed or closing with the application: enqueue() would be refused. */
  readonly closed: boolean;
}

/** The queue of each application's lock service (a WeakMap, not a global: two applications in one process keep theirs). */
const queues = new WeakMap<object, DeferQueue>();

export function attachDeferQueue(lockService: object, queue: DeferQueue | undefined): void {
  if (queue) queues.set(lockService, queue);
  else queues.delete(lockService);
}

export function deferQueueOf(lockService: object): DeferQueue | undefined {
  return queues.get(lockService);
}
