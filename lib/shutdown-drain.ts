import type { Lock } from './lock';

/**
 * What `close()` must wait for before it may close the connection: locks whose work still runs
 * (deleting their keys would let another instance in while that work goes on).
 */
export class ShutdownDrain {
  private readonly locks = new Set<Lock>();
  private onIdle?: () => void;

  /** Locks adopted and not yet released or lost. */
  get held(): ReadonlySet<Lock> {
    return this.locks;
  }

  hold(lock: Lock): void {
    this.locks.add(lock);
  }

  /** The lock ended (released or lost). */
  forget(lock: Lock): void {
    if (this.locks.delete(lock)) this.checkIdle();
  }

  /** Resolves true once no lock is held, false if `ms` passed first. */
  untilIdle(ms: number): Promise<boolean> {
    if (this.idle) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), ms);
      const finish = (drained: boolean) => {
        clearTimeout(timer);
        this.onIdle = undefined;
        resolve(drained);
      };
      this.onIdle = () => finish(true);
    });
  }

  private get idle(): boolean {
    return this.locks.size === 0;
  }

  private checkIdle(): void {
    if (this.onIdle && this.idle) this.onIdle();
  }
}
