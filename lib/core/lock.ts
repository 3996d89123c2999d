import { LockConnectionError } from '../errors/lock-connection.error';
import { LockLostError, LockLostReason } from '../errors/lock-lost.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import { monotonicNow } from '../time/clock';
import { onAbort } from '../time/on-abort';
import { nextTurn } from '../time/sleep';
import { expiryCallSent, Lease, renewLease } from './lease';
import { locksInContext, outsideLockContext } from './lock-context';
import { isThenable } from './thenable';
import type { LockRuntime } from './lock-runtime';
import type { ResolvedLockOptions } from '../options/resolve-options';
import { assertTtl } from '../options/validate-options';
import type { LockHandle } from '../options/lock-handle.interface';

type LockState = 'held' | 'lost' | 'released';

/** Why the watchdog stopped renewing a held lock: `maxHold` reached, or shutdown while its work still ran. */
type RenewalStop = 'max-hold' | 'shutdown';

/** One shared reason: a DOMException per release would capture a stack trace on the hot path. */
const RELEASED = Object.freeze(new DOMException('Lock released', 'AbortError'));

/**
 * A held lock. `signal` aborts when the lease is lost (reason: `LockLostError`), when the service
 * starts shutting down (`LockLostError` with reason `'shutdown'`: the lock is still held, finish or
 * stop the work), or when it is released; `fencingToken` lets a store reject writes from a holder
 * whose lease silently lapsed.
 *
 * A handle made by a nested acquisition of keys the caller already holds (same async context)
 * borrows those keys: its release leaves them to the outer lock.
 */
export class Lock implements LockHandle, AsyncDisposable {
  /** First key in canonical order (the only key of a single-key lock). */
  readonly key: string;
  /** Every key of this lock, in the canonical order they were taken. */
  readonly keys: readonly string[];
  /** Monotonic time (ms) the lock was acquired; `maxHold` and `minHold` count from here. */
  get acquiredAt(): number {
    return this.heldSince;
  }

  private state: LockState = 'held';
  private heldSince = monotonicNow();
  /** Handed to its caller (every key taken); until then it is an acquisition in progress. */
  private handedOut = false;
  private renewalStopped?: RenewalStop;
  /** Nested handles (borrowers) still running on keys of this lock: a release waits for the last one. */
  private borrowers = 0;
  /** This handle counts as a borrower of its outer locks (from its handing out to its end). */
  private borrowing = false;
  /** A release asked for while borrowers still ran: carried out when the last of them ends. */
  private deferredRelease?: { minHold: number; ranWork: boolean; settle: (freeing: Promise<boolean>) => void };
  // Made on first read of `signal`: most locks are never asked for one.
  private controller?: AbortController;
  /** Stops following the outer locks' signals (a nested handle whose `signal` was read), once this handle ends. */
  private stopFollowingOuter?: Array<() => void>;
  /** What `signal` aborts with: the first of a shutdown notice, a loss and the release. */
  private abortReason?: unknown;
  /** Why the lock ended (lost or released); unlike a shutdown notice, it is no longer held. */
  private endReason?: unknown;

  /** Handles are made by the engine only (`Lock.create`). */
  private constructor(
    /** Owner token (128 random bits) stored in Redis; proves ownership to the owner-checked scripts. */
    readonly token: string,
    keys: readonly string[],
    /** @internal Leases this handle took itself, in canonical order. */
    readonly leases: readonly Lease[],
    /** @internal Outer locks this handle borrowed keys from (reentrancy). */
    private readonly outer: readonly Lock[],
    /** @internal */
    readonly options: ResolvedLockOptions,
    private readonly runtime: LockRuntime,
  ) {
    this.keys = keys;
    this.key = keys[0];
  }

  /** @internal A handle for `keys` under `token`; its leases are added as the engine takes them. */
  static create(
    token: string,
    keys: readonly string[],
    leases: readonly Lease[],
    outer: readonly Lock[],
    options: ResolvedLockOptions,
    runtime: LockRuntime,
  ): Lock {
    return new Lock(token, keys, leases, outer, options, runtime);
  }

  /** Fencing token of `key`: strictly greater than every token handed out for that key before. */
  get fencingToken(): number {
    const first = this.leases[0];
    return first?.keys.key === this.key ? first.fence : this.fencingTokens.get(this.key)!;
  }

  /** Fencing token of each key (a nested handle reports the outer lock's token for borrowed keys). */
  get fencingTokens(): ReadonlyMap<string, number> {
    const fences = new Map<string, number>();
    for (const o of this.outer) for (const [k, f] of o.fencingTokens) if (this.keys.includes(k)) fences.set(k, f);
    for (const l of this.leases) fences.set(l.keys.key, l.fence);
    return fences;
  }

  /**
   * Aborts when the lease is lost, the lock released, or the service starts shutting down (reason
   * `LockLostError` with `reason: 'shutdown'`; `isHeld()` stays true until the work releases it).
   * Reading it first checks the deadline, so a holder that was paused past its TTL sees `aborted`
   * even before the watchdog's timer ran; a nested handle checks its outer locks' deadlines too.
   */
  get signal(): AbortSignal {
    this.checkDeadlines();
    if (!this.controller) {
      const controller = (this.controller = new AbortController());
      if (this.abortReason !== undefined) controller.abort(this.abortReason);
      else if (this.outer.length > 0) this.followOuter(controller);
    }
    return this.controller.signal;
  }

  /**
   * A nested handle's signal also aborts with the first of its outer locks' signals (their reason), until
   * the handle ends. Not AbortSignal.any: each signal it makes stays reachable from its sources (about 2 KB,
   * measured on Node 20) for as long as they live, so a lock held for hours around many nested calls that
   * read `signal` grew with the number of those calls. These callbacks leave the outer signals at end().
   */
  private followOuter(controller: AbortController): void {
    const stops: Array<() => void> = [];
    for (const o of this.outer) {
      const outerSignal = o.signal;
      if (outerSignal.aborted) {
        controller.abort(outerSignal.reason);
        break;
      }
      stops.push(onAbort(outerSignal, () => controller.abort(outerSignal.reason)));
    }
    if (controller.signal.aborted) stops.forEach((stop) => stop());
    else this.stopFollowingOuter = stops;
  }

  /**
   * This handle's deadline and those of the outer locks it borrows keys from (directly or through other nested
   * calls). A nested handle that borrows every key has no lease of its own (deadline Infinity): only the outer
   * locks' deadlines say it ran out, and their loss reaches its signal through followOuter.
   */
  private checkDeadlines(): void {
    this.checkDeadline();
    for (const o of this.outer) o.checkDeadlines();
  }

  /** True while every lease is still valid by this process's monotonic clock (the outer locks' too, checked through their isHeld()). */
  isHeld(): boolean {
    this.checkDeadline();
    return this.state === 'held' && this.outer.every((o) => o.isHeld());
  }

  /**
   * Sets the lease of every key of this handle to `ttl` (default: the acquire's ttl), owner-checked. A
   * nested handle extends the outer locks it borrows keys from as well (they hold those keys): to `ttl`
   * when given; without it, each by its own default (its acquire's ttl), as its own extend() would.
   * Throws `LockLostError` if the lock is no longer ours, `LockConnectionError` if Redis did not answer.
   */
  async extend(ttl?: number): Promise<void> {
    if (ttl !== undefined) assertTtl('extend(ttl)', ttl);
    this.assertHeld();
    const own = ttl ?? this.options.ttl;
    // Not the nested call's ttl for the outer locks: a helper's currentLock().extend() inside a nested call (module
    // default ttl) cut an outer lock taken for 5 minutes, watchdog off, to the default, and the watchdog renewed to it.
    if (this.outer.length > 0) await settleAll([this.extendOwn(own), ...this.outer.map((o) => o.extend(ttl))]);
    else await this.extendOwn(own);
  }

  /** extend() of the leases this handle took itself. */
  private async extendOwn(ttl: number): Promise<void> {
    if (this.leases.length === 0) return;
    const sentAt = monotonicNow();
    // Sent first: a store that refuses this ttl (Redlock: above nodeRecoveryDelay) throws here and no
    // lease changes. Then, in the same turn, the leases: the watchdog renews to the lease's ttl, so
    // renewals sent from now on carry the new one.
    const extending = this.leases.map((l) => this.runtime.store.extend(l.keys, this.token, ttl, l.fence));
    const calls = this.leases.map((l) => {
      l.ttl = ttl;
      return expiryCallSent(l, ttl, sentAt);
    });
    const extended = await settleAll(extending);
    this.assertHeld();
    const lostAt = extended.indexOf(false);
    if (lostAt >= 0) {
      this.markLost('not-owner', 'extend() found another owner token (or none) in Redis', undefined, this.leases[lostAt].keys.key);
      this.assertHeld();
    }
    this.leases.forEach((lease, i) => renewLease(lease, ttl, sentAt, calls[i]));
    this.runtime.watchdog.track(this);
  }

  /**
   * Frees the keys this handle took (never a key it borrowed, never another owner's lock).
   * Resolves true when Redis still had our token on every key; false when a lease had already
   * expired or changed hands (logged and counted, nothing deleted), or was known lost before the call
   * (then without a round trip, even after the service closed). A second call resolves false.
   * Rejects with `LockConnectionError` when Redis cannot be reached; the lease then lapses by TTL.
   * While nested calls that borrowed its keys still run (work started under the lock that outlived
   * the callback), the keys stay held and renewed, and the release happens when the last one ends.
   */
  release(): Promise<boolean> {
    return this.free(this.options.minHold, true);
  }

  /**
   * @internal Frees an acquisition that will never be used (a grant that arrived after close() began,
   * or the first keys of a multi-key lock whose later keys failed): nothing ran under it, so `minHold`
   * does not apply. Owner-checked like `release()`, so a queued waiter gets the key at once.
   */
  giveBack(): Promise<boolean> {
    return this.free(0, false);
  }

  /** `ranWork`: a release after the guarded work (its hold time is recorded), not a grant given back unused. */
  private free(minHold: number, ranWork: boolean): Promise<boolean> {
    if (this.state === 'released' || this.deferredRelease) return Promise.resolve(false);
    if (this.borrowers > 0 && this.state === 'held') return this.freeAfterBorrowers(minHold, ranWork);
    // Renewals stopped on purpose (maxHold reached, or shutdown stopped waiting for this work): past its deadline the
    // lease ran out by our clock, and the watchdog that would have said so may not have looked (an event loop blocked
    // past its timer; after close() it is gone). Said here as it would have, with the same reason: a release after the
    // drain otherwise asked a closed connection and counted a release error (Redis trouble) for a lease lost under running
    // work, and one after a blocked loop counted the loss as 'expired' rather than 'max-hold'.
    if (this.renewalStopped !== undefined) this.checkDeadline();
    const wasLost = this.state === 'lost';
    // Read before end(): ending this borrower may let an outer release go ahead.
    const outerHeld = this.outer.length === 0 || this.outer.every((o) => o.isHeld());
    this.state = 'released';
    // Synchronously out of the watchdog: no renewal can be sent for this lock from here on.
    this.runtime.watchdog.untrack(this);
    this.end(RELEASED);
    this.returnOuterKeys();
    if (this.leases.length === 0) return Promise.resolve(!wasLost && outerHeld);
    if (ranWork) this.runtime.metrics.held(this.options.name, monotonicNow() - this.heldSince);
    // Lost after it was handed out: every key it holds was given back, owner-checked, when the loss was noticed
    // (markLost), so nothing of ours is left to delete (should that give-back have failed, the key lapses by its
    // TTL). Asking Redis again only made a release after close() throw (no connection) where it should say false.
    // Not so for an acquisition that lost its first keys while it waited for the rest: keys granted after the loss
    // were not given back then, and are here.
    if (wasLost && this.handedOut) return Promise.resolve(this.released(false, ranWork, this.endReason));
    const keepFor = minHold > 0 ? Math.ceil(minHold - (monotonicNow() - this.heldSince)) : 0;
    let freeing: Promise<boolean>;
    if (keepFor > 0 && !wasLost) freeing = this.shortenTo(keepFor);
    else freeing = this.leases.length === 1 ? this.releaseOne(this.leases[0]) : this.releaseAll();
    // A promise chain rather than an async method: one frame less on every release.
    return freeing.then(
      (ok) => this.released(ok, ranWork),
      (error: unknown) => {
        // The key stays taken until its lease lapses: an operator should see it, not only getStats(). A grant given back
        // unused belongs to an acquisition that failed and was counted as such (a multi-key lock's first keys after a
        // later key's connection error): counting its give-back too made one failed call two connection errors.
        if (ranWork) {
          this.runtime.stats.connectionErrors++;
          this.runtime.metrics.releaseFailed(this.options.name);
        }
        throw error;
      },
    );
  }

  /**
   * Releasing now would free keys under a nested call still running on them (one the callback did not
   * await, such as the slower half of a rejected Promise.all): another instance would enter beside it.
   */
  private freeAfterBorrowers(minHold: number, ranWork: boolean): Promise<boolean> {
    // Called from inside one of those nested calls (outer.release() in a nested withLock/@Locked callback), the
    // release waits for its own caller: awaited there, it hangs until maxHold ends the lease. Say that, rather
    // than send the reader after unawaited work that does not exist.
    const why = this.lentToCaller()
      ? `: release() was called inside a nested call on its keys, so awaiting it there waits for itself until maxHold ` +
        `(${this.options.maxHold} ms) ends the lease. Release the outer lock after the nested call returns, or let its callback end`
      : ` (work started under the lock that its callback did not await); the keys stay held and renewed until they end`;
    this.runtime.logger.warn(
      `Release of lock "${this.keys.join('", "')}" waits for ${this.borrowers} nested call(s) on its keys that are still running${why}.`,
    );
    return new Promise((resolve) => (this.deferredRelease = { minHold, ranWork, settle: resolve }));
  }

  /** Whether the calling code runs inside a nested call that borrows keys of this lock (directly or through other nested calls). */
  private lentToCaller(): boolean {
    for (const lock of locksInContext()) if (lock.borrowsFrom(this)) return true;
    return false;
  }

  /** @internal This handle and every outer lock it borrows keys from, directly or through other nested calls. */
  withOuterLocks(into: Set<Lock> = new Set()): Set<Lock> {
    into.add(this);
    for (const o of this.outer) o.withOuterLocks(into);
    return into;
  }

  private borrowsFrom(lender: Lock): boolean {
    return this.outer.some((o) => (o === lender && this.borrowing) || o.borrowsFrom(lender));
  }

  /** The outer locks keep the borrowed keys until this handle is released. */
  private borrowOuterKeys(): void {
    this.borrowing = true;
    for (const o of this.outer) o.borrowers++;
  }

  /**
   * Once, when this handle is released (not when it is lost: the borrowed keys are still the outer
   * lock's, and the nested work may still run on them): an outer release that waited for it may go ahead.
   */
  private returnOuterKeys(): void {
    if (!this.borrowing) return;
    this.borrowing = false;
    for (const o of this.outer) o.borrowerEnded();
  }

  private borrowerEnded(): void {
    this.borrowers--;
    if (this.borrowers === 0) this.runDeferredRelease();
  }

  /** The release that waited for borrowers, now (the last one ended, or the lock is lost anyway). */
  private runDeferredRelease(): void {
    const deferred = this.takeDeferredRelease();
    deferred?.settle(this.free(deferred.minHold, deferred.ranWork));
  }

  private takeDeferredRelease(): typeof this.deferredRelease {
    const deferred = this.deferredRelease;
    this.deferredRelease = undefined;
    return deferred;
  }

  /**
   * Counts and reports what Redis said to the release (of a grant given back unused: nothing to report).
   * `knownLoss`: the loss noticed before the call, already reported with its own cause; the release
   * names it rather than guess one.
   */
  private released(ok: boolean, ranWork: boolean, knownLoss?: unknown): boolean {
    if (ok) {
      this.runtime.stats.released++;
      return true;
    }
    if (!ranWork) return false;
    this.runtime.stats.releaseFailures++;
    this.runtime.metrics.releaseValidationFailed(this.options.name);
    // A loss noticed before the call was counted then; one only this release found (Redis lost the key: a
    // restart without persistence, a failover, a key deleted behind our back) is counted here, once: the
    // lock is released from now on, so nothing else reports it.
    if (!(knownLoss instanceof LockLostError)) this.countLossFoundByRelease();
    const keys = `"${this.keys.join('", "')}"`;
    this.runtime.logger.warn(
      knownLoss instanceof LockLostError
        ? `release() of lock ${keys}: the lock had been lost before the call (${knownLoss.reason}, reported then); nothing was deleted.`
        : `release() of lock ${keys} found it already expired or owned by someone else; nothing was deleted. The lease ran out ` +
            `before the release: work longer than its lease with the watchdog off, a paused process, or Redis lost the key ` +
            `(a restart without persistence, a failover).`,
    );
    return false;
  }

  /**
   * The lease was gone when release() reached Redis, and nobody noticed before. Past its deadline by our clock
   * it ran out (a paused holder, or the watchdog off and work longer than the ttl: `expired`); before it, Redis
   * no longer had our token although the lease was valid (`not-owner`).
   */
  private countLossFoundByRelease(): void {
    const reason: LockLostReason = monotonicNow() >= this.deadline ? 'expired' : 'not-owner';
    this.runtime.stats.lost++;
    this.runtime.metrics.lost(this.options.name, reason);
  }

  /** `minHold` not reached yet: leave the keys to expire after `ms` instead of deleting them (owner-checked). */
  private async shortenTo(ms: number): Promise<boolean> {
    const results = await Promise.all(this.leases.map((l) => this.runtime.store.shorten(l.keys, this.token, ms)));
    return results.every(Boolean);
  }

  /**
   * @internal All keys are taken and the handle goes to its caller: `maxHold` and `minHold` count from
   * now. `scoped` (withLock and @Locked, which always release it when their callback ends): the outer
   * locks it borrows keys from keep them until then. A bare nested acquire() borrows without holding the
   * outer lock back: nothing obliges its caller to release a handle that took nothing.
   */
  markAcquired(scoped: boolean): void {
    this.heldSince = monotonicNow();
    this.handedOut = true;
    if (scoped && this.outer.length > 0) this.borrowOuterKeys();
  }

  /**
   * @internal close() stops waiting for work still running past shutdownTimeout: a release that waits
   * for nested calls resolves false now (the connection closes; the lease lapses by TTL), so the
   * outer withLock does not stay pending for as long as they run.
   */
  dropDeferredRelease(): void {
    this.takeDeferredRelease()?.settle(Promise.resolve(false));
  }

  /** @internal Whether the caller has it (an acquisition still waiting for later keys has not). */
  get acquired(): boolean {
    return this.handedOut;
  }

  /**
   * One lease. When the release handed the key to a waiter, our caller continues one event-loop turn
   * later: that waiter's notification, read in the same turn as our reply, is handled first, so a
   * waiter in this same process enters before our caller's next steps (typically: asking again).
   */
  private releaseOne(lease: Lease): Promise<boolean> {
    return this.runtime.store.release(lease.keys, this.token).then((outcome) => {
      if (outcome !== 'handed-over') return outcome === 'freed';
      return nextTurn(true);
    });
  }

  /** Every lease, in reverse of the acquisition order (the commands leave in this order on the connection). */
  private async releaseAll(): Promise<boolean> {
    const released = await settleAll([...this.leases].reverse().map((l) => this.releaseOne(l)));
    return released.every(Boolean);
  }

  /**
   * `await using`: released at the end of the block, as withLock releases after its callback. A release Redis does
   * not answer (LockConnectionError) is logged and the lease lapses by TTL, as withLock does: the block's work is
   * done, and failing it now would invite a retry of completed work (or, after a block that threw, hide its error in
   * a SuppressedError). An explicit release() still rejects; any other error (a misuse) is thrown.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.release();
    } catch (error) {
      if (!(error instanceof LockConnectionError)) throw error;
      this.runtime.logger.warn(
        `Release of "${this.keys.join('", "')}" at the end of its await using block failed; its lease will lapse by TTL: ${error.message}`,
      );
    }
  }

  /** @internal Whether the watchdog renews this lock (not once `maxHold` is reached or shutdown gave up waiting for it). */
  get watchdogRenews(): boolean {
    return this.state === 'held' && this.options.watchdog && this.renewalStopped === undefined;
  }

  /** @internal No renewal from now on: the lease lapses by TTL (nothing is deleted under running work). */
  stopRenewing(why: RenewalStop = 'max-hold'): void {
    this.renewalStopped ??= why;
  }

  /**
   * @internal The service is shutting down: aborts `signal` with `notice` so the work finishes or
   * stops. The lock stays held and renewed until it is released (or shutdown stops waiting for it).
   */
  noticeShutdown(notice: LockLostError): void {
    if (this.state === 'held') this.abort(notice);
  }

  /**
   * @internal Marks the lease lost once: aborts the signal, tells `onLockLost`, logs. `lostKey`: the key
   * whose lease ended (a multi-key lock's error names it, and the lock's other keys, rather than its first).
   */
  markLost(reason: LockLostReason, detail: string, cause?: unknown, lostKey: string = this.key): void {
    if (this.state !== 'held') return;
    // Whoever notices the loss (a watchdog tick, a read of isHeld() or signal inside another lock's callback, a
    // waiter that timed out, close() called from a body) may be inside a lock context: the signal's listeners
    // and onLockLost must not run there, where currentLock() names another lock and a lock call borrows its keys.
    outsideLockContext(() => this.lose(reason, detail, cause, lostKey));
  }

  private lose(reason: LockLostReason, detail: string, cause: unknown, lostKey: string): void {
    this.state = 'lost';
    this.runtime.watchdog.untrack(this);
    const ofLock = this.keys.length > 1 ? ` (one of the lock's keys ${this.keys.map((k) => `"${k}"`).join(', ')})` : '';
    const error = new LockLostError(lostKey, reason, detail + ofLock, { cause });
    this.end(error);
    this.runDeferredRelease();
    // Renewals sent before the loss may still sit in a frozen Redis and extend the key once more when
    // it thaws; an owner-checked clean-up queued behind them gives the key back as soon as it does.
    for (const lease of this.leases) this.runtime.store.abandonQuietly(lease.keys, this.token);
    // A multi-key acquisition that lost its first keys while waiting fails instead (see incomplete()):
    // no caller to tell and no work that ran, so no loss to count or warn about.
    if (!this.handedOut) return;
    this.runtime.stats.lost++;
    this.runtime.metrics.lost(this.options.name, reason);
    this.runtime.logger.warn(error.message);
    const reportCallbackError = (callbackError: unknown) =>
      this.runtime.logger.error(`onLockLost threw: ${(callbackError as Error)?.message ?? String(callbackError)}`);
    try {
      const returned: unknown = this.options.onLockLost?.(this, error);
      // An async callback that rejects would otherwise be an unhandled rejection, which ends the
      // process (and leaves every other lock it holds to lapse by TTL).
      if (isThenable(returned)) returned.then(undefined, reportCallbackError);
    } catch (callbackError) {
      reportCallbackError(callbackError);
    }
  }

  /** @internal Earliest lease deadline (monotonic ms). */
  get deadline(): number {
    let min = Infinity;
    for (const l of this.leases) min = Math.min(min, l.deadline);
    return min;
  }

  /** @internal */
  checkDeadline(now: number = monotonicNow()): void {
    if (this.state !== 'held' || now < this.deadline) return;
    const ranOut = this.leases.reduce((first, l) => (l.deadline < first.deadline ? l : first)).keys.key;
    if (this.renewalStopped === 'max-hold') {
      this.markLost(
        'max-hold',
        `held longer than maxHold (${this.options.maxHold} ms); the watchdog stopped renewing and the lease ran out`,
        undefined,
        ranOut,
      );
    } else if (this.renewalStopped === 'shutdown') {
      this.markLost(
        'expired',
        'the LockService shut down while this work still ran past shutdownTimeout; renewals stopped and the lease ran out',
        undefined,
        ranOut,
      );
    } else {
      this.markLost(
        'expired',
        `its lease ran out at this process's clock before a renewal succeeded (paused process, blocked event loop or unreachable Redis)`,
        undefined,
        ranOut,
      );
    }
  }

  /** The lock ended (lost or released): aborts the signal, unless a shutdown notice already did, and leaves the service's books. */
  private end(reason: unknown): void {
    if (this.endReason !== undefined) return;
    this.endReason = reason;
    this.abort(reason);
    this.stopFollowingOuter?.forEach((stop) => stop());
    this.stopFollowingOuter = undefined;
    this.runtime.forget(this);
  }

  /** Aborts the signal (if anyone asked for it) with the first reason given. */
  private abort(reason: unknown): void {
    if (this.abortReason !== undefined) return;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }

  private assertHeld(): void {
    if (this.isHeld()) return;
    const reason = this.endReason;
    if (reason instanceof LockLostError) throw reason;
    for (const o of this.outer) o.assertHeld();
    throw new LockLostError(this.key, 'not-owner', 'it was released by this process before this call; acquire it again to hold it');
  }

  /**
   * @internal For an acquisition that has taken every key but is no longer whole, the error it fails
   * with (undefined while whole): nothing ran under it, and the engine gives back what it took.
   * - an outer lock it borrows keys from ended while it waited for its own: a nested call counts as a
   *   borrower only once it has every key, so an outer callback that ends first releases;
   * - a key it took first ran out while it waited for a later one: with the watchdog off, its ttl was
   *   shorter than the wait (a timeout, with what to change); with it on, renewals failed.
   */
  incomplete(waitedMs: number, attempts: number): Error | undefined {
    if (this.isHeld()) return undefined;
    const ended = this.outer.find((o) => !o.isHeld());
    if (ended) {
      const cause = ended.endReason instanceof LockLostError ? ended.endReason : undefined;
      const how = cause ? `was lost (${cause.reason})` : 'was released (its withLock/@Locked callback ended)';
      return new LockLostError(
        this.key,
        cause?.reason ?? 'not-owner',
        `the outer lock "${ended.key}" this nested call borrows keys from ${how} before this call had all its keys; nothing ran under it, ` +
          'and the keys it took are given back. Await nested lock calls inside the callback that holds the outer lock',
        { cause },
      );
    }
    const loss = this.endReason instanceof LockLostError ? this.endReason : undefined;
    const keys = `"${this.keys.join('", "')}"`;
    if (loss?.reason === 'expired' && !this.options.watchdog) {
      return new LockTimeoutError(
        this.keys[this.keys.length - 1],
        waitedMs,
        attempts,
        `the keys of ${keys} taken first ran out (ttl ${this.options.ttl} ms, watchdog off) while the rest were still held elsewhere; ` +
          'nothing ran under the lock and the keys taken were given back. Use a ttl longer than waitTimeout, or keep the watchdog on',
      );
    }
    return new LockConnectionError(
      `The keys of ${keys} taken first were lost while waiting for the rest${loss ? ` (${loss.reason})` : ''}; ` +
        'nothing ran under the lock and the keys taken were given back.',
      'acquire',
      { cause: loss },
    );
  }
}

/**
 * Waits for every call (none is left running unseen), then rethrows the first failure or returns
 * every result: one key's Redis error must not hide what the other keys' calls did.
 */
async function settleAll<T>(calls: Array<Promise<T>>): Promise<T[]> {
  const results = await Promise.allSettled(calls);
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}
