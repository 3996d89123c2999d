import type { Logger } from '@nestjs/common';
import { monotonicNow } from '../time/clock';
import { nextTurn } from '../time/sleep';
import { Lease, driftFor, expiryCallSent, renewIntervalFor, renewLease } from './lease';
import type { Lock } from './lock';
import { outsideLockContext } from './lock-context';
import type { LockStats } from './lock-stats';
import type { LockMetrics } from '../observability/lock-metrics';
import type { LockStore, RenewRequest } from './lock-store';

/**
 * Most renewals one pipeline carries. Building, sending and parsing a renewal costs about 10 µs of
 * client CPU here, so 500 keep each turn of the event loop near 5 ms; with 10,000 leases one pipeline
 * per tick stalled the event loop for over 100 ms (figures: docs/benchmark.md).
 */
const RENEWALS_PER_PIPELINE = 500;

/** A tick also renews leases due within this share of their renewal interval: one round trip for near neighbours. */
const COALESCE_SHARE = 1 / 4;

/** After a failed renewal, retry after this share of the renewal interval (at least the drift allowance): still within the lease. */
const RETRY_SHARE = 1 / 3;

/** @internal What the watchdog knows about keeping leases alive (see `Watchdog.health`). */
export interface WatchdogHealth {
  /** Leases the watchdog keeps renewing. */
  leases: number;
  /** Of those, leases with less than one renewal interval left before their deadline. */
  lagging: number;
  /** Least time left before a renewed lease's deadline (ms; negative once past it); undefined with no lease. */
  tightestMarginMs?: number;
  /**
   * A lease of a lock still held whose last renewal failed: the latest such failure, how long ago and why, and
   * how many held leases are in that state. Undefined once each of them renewed again, or its lock was released
   * or lost (and reported as lost).
   */
  failing?: { agoMs: number; message: string; leases: number };
}

/** One lease due for renewal, with the lock it belongs to. */
interface DueRenewal {
  lock: Lock;
  lease: Lease;
}

/**
 * Keeps every held lease alive while its holder runs, and notices when one is gone.
 *
 * One timer for all locks, set to the earliest renewal or deadline. A tick first expires locks
 * whose deadline passed (a paused process must not renew a lease that may already belong to
 * someone else), then renews everything due within a short window in one round trip: pipelines of
 * at most RENEWALS_PER_PIPELINE, sent back to back.
 * Timers are unref'd and every failure is caught: the watchdog never keeps a process alive and
 * never produces an unhandled rejection.
 */
export class Watchdog {
  private readonly locks = new Set<Lock>();
  private timer?: NodeJS.Timeout;
  private timerAt = Infinity;
  private stopped = false;
  /**
   * Leases of held locks whose last renewal failed (monotonic ms of that failure, and why). What a health
   * check reports: an instance whose renewals fail while its probe write passes (a frozen node, a script
   * refused) is about to lose locks it holds. A lease leaves it when a renewal of it succeeds or when its lock
   * leaves the watchdog (released, or lost and reported): a failure kept after that said "down" for a whole
   * renewalErrorWindow about a Redis that had recovered, with nothing held, and a liveness probe restarted a
   * healthy instance. Per lease, not per lock: one key of a multi-key lock renewed does not vouch for another.
   */
  private readonly failedRenewals = new Map<Lease, { at: number; message: string }>();

  constructor(
    private readonly store: LockStore,
    private readonly logger: Logger,
    private readonly stats: LockStats,
    private readonly metrics: LockMetrics,
  ) {}

  /**
   * Watches `lock` (again, after it gained a lease or was extended). O(1) in the number of held
   * locks: only this lock's times are compared with the armed timer, so taking N locks is O(N).
   */
  track(lock: Lock): void {
    if (this.stopped) return;
    this.locks.add(lock);
    const next = this.nextTimeOf(lock);
    if (next < this.timerAt) this.arm(next);
  }

  /**
   * Synchronous, so a release can never be followed by a renewal of the same lock. The timer stays
   * armed (unref'd) even when nothing is left: a tick with nothing due costs less than clearing and
   * setting a timer on every acquire + release.
   */
  untrack(lock: Lock): void {
    this.locks.delete(lock);
    for (const lease of lock.leases) this.failedRenewals.delete(lease);
  }

  stop(): void {
    this.stopped = true;
    this.locks.clear();
    this.failedRenewals.clear();
    this.clearTimer();
  }

  /**
   * @internal For health checks, O(held leases). A lease is lagging when the watchdog should be
   * renewing it and less than one renewal interval is left before its deadline: at least one
   * renewal is overdue (an event loop too busy, or Redis too slow to answer in time).
   */
  health(now: number): WatchdogHealth {
    let leases = 0;
    let lagging = 0;
    let tightestMarginMs: number | undefined;
    for (const lock of this.locks) {
      if (!lock.watchdogRenews) continue; // maxHold reached or shutting down: its lease runs out on purpose
      for (const lease of lock.leases) {
        leases++;
        const margin = lease.deadline - now;
        tightestMarginMs = Math.min(tightestMarginMs ?? Infinity, margin);
        // Against the lease's own period: a handed-over lease starts with only the waiter's lease left (3 s by default,
        // against a ttl of 30 s), which is on schedule, not a third of the ttl behind it.
        if (margin < renewIntervalFor(lease.period)) lagging++;
      }
    }
    return { leases, lagging, tightestMarginMs, failing: this.failing(now) };
  }

  /** The latest renewal failure of a lease still held, if any (see failedRenewals). */
  private failing(now: number): WatchdogHealth['failing'] {
    let latest: { at: number; message: string } | undefined;
    for (const failure of this.failedRenewals.values()) if (!latest || failure.at > latest.at) latest = failure;
    return latest && { agoMs: now - latest.at, message: latest.message, leases: this.failedRenewals.size };
  }

  /** Re-arms the timer for the earliest renewal or deadline (after a tick, or while renewals are on the wire). */
  private reschedule(): void {
    if (this.stopped) return;
    let next = Infinity;
    for (const lock of this.locks) next = Math.min(next, this.nextTimeOf(lock));
    if (next === Infinity) return this.clearTimer();
    if (this.timer && next >= this.timerAt) return;
    this.arm(next);
  }

  /** Earliest deadline or due renewal of one lock (monotonic ms). */
  private nextTimeOf(lock: Lock): number {
    let next = Infinity;
    const renewing = lock.watchdogRenews;
    for (const lease of lock.leases) {
      next = Math.min(next, lease.deadline);
      if (renewing && !lease.renewalInFlight) next = Math.min(next, lease.renewAt);
    }
    return next;
  }

  private arm(at: number): void {
    this.clearTimer();
    this.timerAt = at;
    // Re-armed from its own ticks, the timer would keep the async context of the call that first armed it
    // (a nested lock inside a withLock callback), and with it a lock released long ago, alive for as long as
    // any lock is tracked. (Loss notifications leave every lock context themselves: Lock.markLost.)
    this.timer = outsideLockContext(() => setTimeout(() => void this.tick(), Math.max(0, Math.ceil(at - monotonicNow()))));
    this.timer.unref();
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.timerAt = Infinity;
    try {
      await this.renewDue();
    } catch (error) {
      this.logger.error(`Watchdog tick failed: ${(error as Error)?.stack ?? String(error)}`);
    } finally {
      this.reschedule();
    }
  }

  private async renewDue(): Promise<void> {
    const now = monotonicNow();
    const due: DueRenewal[] = [];
    for (const lock of [...this.locks]) {
      lock.checkDeadline(now);
      if (!lock.watchdogRenews) continue;
      // maxHold counts from the handing out: a multi-key acquisition waiting for its later keys is not held yet.
      if (lock.acquired && now - lock.acquiredAt >= lock.options.maxHold) {
        lock.stopRenewing();
        this.logger.warn(`Lock "${lock.key}" reached maxHold (${lock.options.maxHold} ms); no more renewals, its lease will run out.`);
        continue;
      }
      for (const lease of lock.leases) {
        // Coalesce: renew whatever falls due in the next quarter interval in this same round trip.
        if (!lease.renewalInFlight && lease.renewAt <= now + renewIntervalFor(lease.ttl) * COALESCE_SHARE) due.push({ lock, lease });
      }
    }
    if (due.length === 0) return;
    for (const d of due) d.lease.renewalInFlight = true;
    // Keep the deadline timer armed while these renewals are on the wire: on a frozen Redis the
    // reply (or our timeout) can come up to commandTimeout after a lease's deadline, and the holder
    // must learn of the loss at the deadline, not then.
    this.reschedule();
    // Pipelines of at most RENEWALS_PER_PIPELINE, each built in its own turn of the event loop and
    // sent without waiting for the previous one's replies: the tick still waits one round trip, but
    // never stalls the application for the time it takes to build and parse thousands of commands.
    const sending: Promise<void>[] = [];
    for (let from = 0; from < due.length; from += RENEWALS_PER_PIPELINE) {
      if (from > 0) await nextTurn();
      // A lock released (or lost) while we yielded gets no renewal: none is ever sent after release().
      const live: DueRenewal[] = [];
      for (const d of due.slice(from, from + RENEWALS_PER_PIPELINE)) {
        if (d.lock.watchdogRenews) live.push(d);
        else d.lease.renewalInFlight = false;
      }
      if (live.length > 0) sending.push(this.renew(live));
    }
    await Promise.all(sending);
  }

  /** Renews `due` in one pipeline and applies each answer to its lease. */
  private async renew(due: readonly DueRenewal[]): Promise<void> {
    const requests: RenewRequest[] = due.map(({ lock, lease }) => ({ keys: lease.keys, token: lock.token, ttl: lease.ttl, fence: lease.fence }));
    const sentAt = monotonicNow();
    const calls = due.map(({ lease }, i) => expiryCallSent(lease, requests[i].ttl, sentAt));
    const results = await this.store.renewMany(requests);
    const answeredAt = monotonicNow();
    results.forEach((result, i) => {
      const { lock, lease } = due[i];
      lease.renewalInFlight = false;
      if (!lock.watchdogRenews) return; // released or lost while the renewal was on the wire
      if (result === true) {
        this.stats.renewals++;
        this.metrics.renewal(lock.options.name, 'renewed');
        this.failedRenewals.delete(lease);
        // A reply that came back after the old deadline cannot revive the lease: someone else may
        // have held the key in between by Redis' clock.
        if (answeredAt >= lease.deadline) return lock.checkDeadline(answeredAt);
        renewLease(lease, requests[i].ttl, sentAt, calls[i]);
      } else if (result === false) {
        this.metrics.renewal(lock.options.name, 'lost');
        lock.markLost(
          'not-owner',
          'a renewal found another owner token (or none) in Redis: the lease had already expired',
          undefined,
          lease.keys.key,
        );
      } else {
        this.stats.renewalErrors++;
        this.metrics.renewal(lock.options.name, 'error');
        this.failedRenewals.set(lease, { at: answeredAt, message: result.message });
        // Try again soon, but still within the lease; the deadline check declares the loss if Redis stays away.
        lease.renewAt = answeredAt + Math.max(driftFor(lease.ttl), Math.floor(renewIntervalFor(lease.ttl) * RETRY_SHARE));
        this.logger.warn(`Renewing lock "${lock.key}" failed, retrying before the lease ends: ${result.message}`);
      }
    });
  }
}
