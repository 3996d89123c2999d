import { IdleWait } from '../time/idle-wait';
import type { Lock } from './lock';

/**
 * What `close()` must wait for before it may close the connection: locks whose work still runs
 * (deleting their keys would let another instance in while that work goes on), and acquisitions
 * still in flight (a grant that arrives during close must be given back, through this connection,
 * and a waiter must leave its queue). Plain counters and a set: the common path pays two
 * increments per acquisition, no promise.
 */
export class ShutdownDrain {
  /**
   * The drains of this process that hold at least one lock (every LockService's), for one question asked only
   * when a wait times out: does this process hold the key itself (`heldInProcess`)? One add and one delete per
   * held period of a service, nothing per lock.
   */
  private static readonly holding = new Set<ShutdownDrain>();
  private readonly locks = new Set<Lock>();
  /** Where this drain's service keeps its locks (LockBackend.location): another service matches only the same place. */
  location?: string;
  private acquiring = 0;
  private readonly idleWait = new IdleWait();

  /** Locks adopted and not yet released or lost. */
  get held(): ReadonlySet<Lock> {
    return this.locks;
  }

  hold(lock: Lock): void {
    if (this.locks.size === 0) ShutdownDrain.holding.add(this);
    this.locks.add(lock);
  }

  /** The lock ended (released or lost). */
  forget(lock: Lock): void {
    if (!this.locks.delete(lock)) return;
    if (this.locks.size === 0) ShutdownDrain.holding.delete(this);
    this.checkIdle();
  }

  /**
   * A lock of this process holding the Redis lock `lockName` (the key under its prefix), and whether this drain's
   * own service holds it: O(held locks), asked only when a wait timed out.
   */
  heldInProcess(lockName: string): { lock: Lock; ownService: boolean } | undefined {
    for (const drain of ShutdownDrain.holding) {
      const ownService = drain === this;
      if (!ownService && (drain.location === undefined || drain.location !== this.location)) continue;
      for (const lock of drain.locks) {
        if (lock.isHeld() && lock.leases.some((lease) => lease.keys.lock === lockName)) return { lock, ownService };
      }
    }
    return undefined;
  }

  /** The service closed: its locks are released, or left to lapse (past shutdownTimeout), and never asked about again. */
  retire(): void {
    ShutdownDrain.holding.delete(this);
  }

  /** An acquisition began; `acquisitionSettled()` follows once it holds its lock or gave back all it got. */
  acquisitionStarted(): void {
    this.acquiring++;
  }

  acquisitionSettled(): void {
    this.acquiring--;
    this.checkIdle();
  }

  /** Resolves true once no lock is held and no acquisition is in flight, false if `ms` passed first. */
  untilIdle(ms: number): Promise<boolean> {
    return this.idleWait.until(() => this.locks.size === 0 && this.acquiring === 0, ms);
  }

  /**
   * The same but for `except`: the locks of a close() called from work under them, which cannot end
   * before that close() returns to it.
   */
  untilIdleExcept(except: ReadonlySet<Lock>, ms: number): Promise<boolean> {
    return this.idleWait.until(() => this.acquiring === 0 && [...this.locks].every((lock) => except.has(lock)), ms);
  }

  private checkIdle(): void {
    this.idleWait.changed();
  }
}
