import { LockTimeoutError } from '../../../lib';

/**
 * The lock the incident had: a mutex per key inside ONE process. It serialises the claims that
 * reach this instance and knows nothing about the other two instances behind the load balancer.
 * A wait that runs out is the library's own LockTimeoutError, so both modes answer the same 409.
 */

interface Waiter {
  wake(): void;
}

export class InProcessMutex {
  private readonly queues = new Map<string, Waiter[]>();

  /** Runs `fn` alone (for this process) on `key`; FIFO; gives up after `waitMs`. */
  async runExclusive<T>(key: string, waitMs: number, fn: () => Promise<T>): Promise<T> {
    await this.enter(key, waitMs);
    try {
      return await fn();
    } finally {
      this.leave(key);
    }
  }

  /** Runs `fn` only if nobody in this process holds `key`; otherwise resolves to `undefined` at once. */
  async runIfFree<T>(key: string, fn: () => Promise<T>): Promise<T | undefined> {
    if (this.queues.has(key)) return undefined;
    this.queues.set(key, []);
    try {
      return await fn();
    } finally {
      this.leave(key);
    }
  }

  private enter(key: string, waitMs: number): Promise<void> {
    const queue = this.queues.get(key);
    if (!queue) {
      this.queues.set(key, []);
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        wake: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        queue.splice(queue.indexOf(waiter), 1);
        reject(new LockTimeoutError(key, waitMs, 1));
      }, waitMs);
      queue.push(waiter);
    });
  }

  /** Hands the key to the next waiter (it stays taken) or frees it. */
  private leave(key: string): void {
    const queue = this.queues.get(key);
    const next = queue?.shift();
    if (next) next.wake();
    else this.queues.delete(key);
  }
}

/** One per process, like the `private readonly mutex = new Mutex()` of the incident's service. */
export const processMutex = new InProcessMutex();
