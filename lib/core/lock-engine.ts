import { setMaxListeners } from 'node:events';
import { Logger } from '@nestjs/common';
import { AcquireContext, AcquireTally, acquireOneKey } from './acquire/acquire-one-key';
import { abortedBy, abortReason } from './acquire/acquire-context';
import { DistributedLockError } from '../errors/distributed-lock.error';
import { LockBusyError } from '../errors/lock-busy.error';
import { LockKeyError } from '../errors/lock-key.error';
import { describeValue } from '../errors/describe-value';
import { LockConnectionError } from '../errors/lock-connection.error';
import { LockLostError } from '../errors/lock-lost.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { LockTimeoutError } from '../errors/lock-timeout.error';
import type { DistributedLockModuleOptions } from '../options/distributed-lock-module-options.interface';
import type { LockOptions, WithLockOptions } from '../options/lock-options.interface';
import { monotonicNow } from '../time/clock';
import type { LockEngineHealth } from './lock-engine-health';
import { normalizeKeys } from '../keys/normalize-keys';
import { newOwnerToken, newServiceId } from './owner-token';
import type { Lease } from './lease';
import { Lock } from './lock';
import { deferredWorkKind, discardDeferredWork } from './deferred-work-result';
import { heldInContext, insideLockContext, locksInContext, runInLockContext } from './lock-context';
import type { LockRuntime } from './lock-runtime';
import { LockStats, emptyStats } from './lock-stats';
import type { AcquireOutcome, LockMetrics } from '../observability/lock-metrics';
import { createLockMetrics } from '../observability/otel-lock-metrics';
import { WITH_LOCK_FALLBACK_EXAMPLE, assertFallbackUsed } from '../options/fallback-option';
import { ResolvedLockOptions, ResolvedModuleOptions, resolveLockOptions, resolveModuleOptions } from '../options/resolve-options';
import type { HandoverChannel } from './handover-channel';
import type { LockBackend, LockBackendFactory } from './lock-backend';
import type { LockKeys, LockStore } from './lock-store';
import { ShutdownDrain } from './shutdown-drain';
import { thenOf } from './thenable';
import type { StoreProbe } from './store-probe';
import { Watchdog } from './watchdog';

let nextEngineId = 1;
const NO_LOCKS: readonly Lock[] = Object.freeze([]);

/**
 * The lock engine: the composition root that builds the backend (store and wake channel: Redis, or
 * memory for tests), watchdog and shutdown drain of one `LockService`, and the acquire / hold / close
 * logic over them, the same whatever the backend. `LockService` is the
 * Nest-facing façade over one engine; `Lock` handles reach the engine through `LockRuntime`.
 */
export class LockEngine implements LockRuntime {
  /** Distinguishes engines in the async lock context (two applications in one process). */
  readonly engineId = nextEngineId++;
  readonly store: LockStore;
  readonly watchdog: Watchdog;
  readonly logger = new Logger('DistributedLock');
  readonly stats: LockStats = emptyStats();
  /** OpenTelemetry metrics and spans when `@opentelemetry/api` is installed; records nothing otherwise. */
  readonly metrics: LockMetrics = createLockMetrics((message) => this.logger.error(message));
  readonly settings: ResolvedModuleOptions;

  private readonly backend: LockBackend;
  readonly wakeChannel: HandoverChannel;
  /** Prefix of every owner token of this engine; names its wake channel. */
  private readonly serviceId = newServiceId();
  /** Aborts when the drain begins (drain() or close()): no new lock is taken from then on, and waiters stop waiting. */
  private readonly shutdown = new AbortController();
  /**
   * Aborts when close() begins, whether at shutdown or because startup failed: the connections close once the
   * drain is over. Apart from `shutdown` because in a Nest application the drain begins a lifecycle phase earlier
   * (lock-module-drain.ts), and what closes with the connections (the defer queue) must stay open until then.
   */
  private readonly closeRequested = new AbortController();
  get closeSignal(): AbortSignal {
    return this.closeRequested.signal;
  }
  /** Aborts when the drain begins: what waits and pauses listen to (for diagnostics and tests). */
  get drainSignal(): AbortSignal {
    return this.shutdown.signal;
  }
  /** Held locks and acquisitions in flight: what close() waits for before closing the connection. */
  private readonly drain = new ShutdownDrain();
  /** The drain is over: not even a nested call that borrows a held key is served any more. */
  private closed = false;
  /** What every acquisition needs; the same for all of them. */
  private readonly acquireContext: AcquireContext;
  private draining?: Promise<void>;
  /** When the drain's wait ends at the latest (monotonic ms): later calls of drain() or close() share its bound. */
  private drainDeadline = 0;
  private closing?: Promise<void>;

  constructor(options: DistributedLockModuleOptions, makeBackend: LockBackendFactory) {
    this.settings = resolveModuleOptions(options);
    // Several parts listen for shutdown (the waiters share one listener, time/on-abort.ts); none is a leak.
    setMaxListeners(0, this.shutdown.signal);
    const { settings, serviceId, logger } = this;
    this.backend = makeBackend({ options, settings, serviceId, logger, shutdown: this.shutdown.signal });
    this.store = this.backend.store;
    this.drain.location = this.backend.location;
    this.wakeChannel = this.backend.wakeChannel;
    this.watchdog = new Watchdog(this.store, this.logger, this.stats, this.metrics);
    this.acquireContext = {
      store: this.store,
      wakeChannel: this.wakeChannel,
      confirmsHandovers: this.backend.confirmsHandovers,
      waiterLease: settings.waiterLease,
      shutdown: this.shutdown.signal,
      heldInProcess: (keys) => this.heldInProcess(keys),
    };
  }

  /**
   * Startup: waits (bounded) for the backend, so the first lock of the application does not fail on a
   * handshake in progress. When the backend refuses to start (Redis unreachable with
   * `requireRedisAtStartup`), closes what the module made and fails startup.
   */
  async ready(): Promise<void> {
    if (this.shutdown.signal.aborted) {
      throw new DistributedLockError(
        'The LockService was closed before it started (onModuleInit() after close()): a closed service does not start again; make a new one.',
      );
    }
    try {
      await this.untilClosing(this.backend.ready());
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  /** `step`, or a rejection as soon as close() begins (startup must not wait its whole startupTimeout for a service being closed). */
  private untilClosing(step: Promise<void>): Promise<void> {
    const signal = this.shutdown.signal;
    return new Promise<void>((resolve, reject) => {
      const onClose = () => reject(new DistributedLockError('close() was called while the LockService was starting: startup stopped.'));
      signal.addEventListener('abort', onClose, { once: true });
      step.then(resolve, reject).finally(() => signal.removeEventListener('abort', onClose));
    });
  }

  /** @internal Health facts read locally, for lib/terminus (see LockEngineHealth). */
  health(): LockEngineHealth {
    return {
      closing: this.shutdown.signal.aborted,
      wakeChannel: this.wakeChannel.state,
      watchdog: this.watchdog.health(monotonicNow()),
      commandTimeout: this.settings.commandTimeout,
    };
  }

  /** @internal The health check's round trip to the store, bounded by commandTimeout (see LockStore.probe). */
  probeStore(): Promise<StoreProbe> {
    return this.store.probe();
  }

  /**
   * Runs `fn` while holding the lock and releases it afterwards, whatever `fn` does.
   * With `'fail-fast'` a busy key resolves to `fallback` without running `fn`.
   * Inside `fn`, `currentLock()` returns the lock and nested acquisitions of the same keys are reentrant.
   */
  async withLock<T, F = undefined>(
    key: string | readonly string[],
    fn: (lock: Lock) => T | Promise<T>,
    options?: WithLockOptions<F>,
  ): Promise<T | F> {
    if (typeof fn !== 'function') {
      // The options first and the callback last is the likely slip (other libraries take them in that order).
      const swapped = typeof options === 'function' ? ' The options come after the callback: withLock(key, fn, options).' : '';
      throw new DistributedLockError(
        `withLock(key, fn, options?): fn must be the function to run under the lock, got ${describeValue(fn)}.${swapped}`,
      );
    }
    const resolved = this.resolve(options);
    if (options?.fallback !== undefined) {
      assertFallbackUsed(
        'withLock options.fallback',
        resolved.onBusy,
        options.onBusy === undefined ? 'module default' : 'given',
        WITH_LOCK_FALLBACK_EXAMPLE,
      );
    }
    let lock: Lock;
    try {
      lock = await this.take(key, resolved, true);
    } catch (error) {
      if (error instanceof LockBusyError && resolved.onBusy === 'fail-fast') {
        const fallback = options?.fallback;
        return (typeof fallback === 'function' ? (fallback as () => F)() : fallback) as F;
      }
      throw error;
    }
    let result: T;
    try {
      result = await runInLockContext(this.engineId, lock, () => startInContext(fn(lock)));
      const deferred = deferredWorkKind(result);
      if (deferred) {
        discardDeferredWork(result);
        throw new DistributedLockError(
          `withLock("${lock.keys.join('", "')}"): the callback returned ${deferred}, whose work runs as it is consumed: after the ` +
            `callback returned and the lock was released, unlocked, beside the next holder. Consume it inside the callback ` +
            `(for await, lastValueFrom(...), or read the stream into a Buffer) and return the result.`,
        );
      }
    } catch (error) {
      await lock.release().catch((releaseError: Error) => this.logger.warn(`Release after a failed callback failed: ${releaseError.message}`));
      throw error;
    }
    try {
      await lock.release();
    } catch (error) {
      // The work is done; failing it now would invite a retry of completed work. The lease lapses by TTL.
      this.logger.warn(`Release of "${lock.keys.join('", "')}" failed; its lease will lapse by TTL: ${(error as Error).message}`);
    }
    return result;
  }

  /** Whether anyone holds `key` right now (a snapshot: it may change the moment it is returned). */
  async isLocked(key: string): Promise<boolean> {
    if (typeof key !== 'string') {
      // normalizeKeys takes a list too, and this would answer for its first key only.
      throw new LockKeyError(`isLocked(key): expected one key (a string), got ${describeValue(key)}. Ask once per key.`);
    }
    const [k] = normalizeKeys(key);
    // Past the drain the connection is closing (or is the user's, which this service no longer uses): say
    // the service closed, as every other call does, rather than that Redis cannot be reached.
    if (this.closed) throw new LockServiceClosedError(k, 'isLocked() came after close() ended', 'was not looked up');
    return this.store.isLocked(this.store.keysFor(k));
  }

  /**
   * Shuts down without deleting a key under running work: takes no new locks (`LockServiceClosedError`),
   * stops waiters, aborts every held lock's `signal` (`LockLostError`, reason `'shutdown'`) and waits,
   * bounded by `shutdownTimeout`, for that work to release its locks while the watchdog keeps renewing
   * them; a grant that arrives meanwhile is given back. Work still running after the bound keeps its
   * keys: renewals stop and the leases lapse by TTL (logged by key). Then closes connections the module made.
   */
  close(): Promise<void> {
    const callers = this.locksOfCaller();
    // Before the drain: what listens (the defer worker) sends runs still waiting for a lock back to their queue
    // before the drain ends those waits with LockServiceClosedError.
    this.closeRequested.abort();
    const drained = this.startDrain();
    this.closing ??= drained.then(() => this.backend.close());
    return callers.size === 0 ? this.closing : this.untilDrainedExcept(callers);
  }

  /**
   * close() but for the connections: the same drain (no new lock, held locks told through `signal`, their work
   * waited for up to `shutdownTimeout`), resolved when it is over; the connections stay open for close(). The
   * Nest module drains before other modules' shutdown hooks run and closes its connections last (lock-module-drain.ts).
   */
  drainLocks(): Promise<void> {
    const callers = this.locksOfCaller();
    const drained = this.startDrain();
    return callers.size === 0 ? drained : this.untilDrainedExcept(callers);
  }

  private startDrain(): Promise<void> {
    if (!this.draining) {
      this.drainDeadline = monotonicNow() + this.settings.shutdownTimeout;
      this.draining = this.doDrain();
    }
    return this.draining;
  }

  /**
   * Called from work under locks of this service (a job that shuts the application down on a fatal error):
   * that work cannot release them before this call returns to it. Waiting for them here would wait out the
   * whole shutdownTimeout and then leave their keys to lapse by TTL; instead this call returns once the
   * rest is drained, and the connection closes when the caller's work has released its locks too (within
   * the same shutdownTimeout, like all work).
   */
  private untilDrainedExcept(callers: ReadonlySet<Lock>): Promise<void> {
    const left = Math.max(0, this.drainDeadline - monotonicNow());
    return this.drain.untilIdleExcept(callers, left).then(() => undefined);
  }

  /** Locks of this service held by the calling code's chain (with the outer locks its nested calls borrow from). */
  private locksOfCaller(): Set<Lock> {
    const locks = new Set<Lock>();
    if (!insideLockContext()) return locks;
    for (const lock of locksInContext()) if (this.drain.held.has(lock)) lock.withOuterLocks(locks);
    return locks;
  }

  /** Merges call options over the module defaults (validated before any Redis command). */
  resolve(options: LockOptions | undefined): ResolvedLockOptions {
    return resolveLockOptions(this.settings.defaults, options, 'options');
  }

  /**
   * Takes `key` (or every key, all-or-nothing, in canonical order) under resolved options. `scoped`: the
   * caller releases the lock when its callback ends (withLock, @Locked), so a nested take holds the
   * outer locks it borrows from until then.
   */
  take(key: string | readonly string[], options: ResolvedLockOptions, scoped = false): Promise<Lock> {
    let keys: string[];
    try {
      keys = normalizeKeys(key);
    } catch (error) {
      return Promise.reject(error);
    }
    try {
      this.store.assertLeaseOptions?.(options);
    } catch (error) {
      return Promise.reject(error);
    }
    // Given up before it began (LockOptions.signal): nothing is asked of Redis.
    if (options.signal?.aborted) return Promise.reject(abortReason(options.signal));
    let toTake: readonly string[] = keys;
    let outer: readonly Lock[] = NO_LOCKS;
    if (insideLockContext()) ({ toTake, outer } = this.splitReentrant(keys));
    // While close() drains, work under a held lock may still call a method locked on the same key:
    // that borrows the key and takes nothing. Anything that would take a key is refused.
    if (this.shutdown.signal.aborted && (toTake.length > 0 || this.closed)) {
      // Counted (outcome closed): a deploy's shutdown turns callers away, and a dashboard should show it.
      this.recordAcquire(options.name, 'closed', { startedAt: monotonicNow(), attempts: 0, waited: false });
      return Promise.reject(new LockServiceClosedError(keys[0], 'the call came after close() began'));
    }
    const token = newOwnerToken(this.serviceId, options.ttl);
    const leases: Lease[] = [];
    const tally: AcquireTally = { startedAt: monotonicNow(), attempts: 0, waited: false };
    const waitUntil = tally.startedAt + (options.onBusy === 'retry' ? options.waitTimeout : 0);
    const pending = Lock.create(token, keys, leases, outer, options, this);
    this.drain.acquisitionStarted();
    if (toTake.length !== 1 || outer.length > 0) return this.takeEach(pending, toTake, leases, waitUntil, tally, scoped);
    // One key, nothing borrowed (the common case): a plain promise chain, no async frame.
    const keysOfLock = this.store.keysFor(toTake[0]);
    return acquireOneKey(this.acquireContext, keysOfLock, token, options, waitUntil, tally).then(
      (lease) => {
        leases.push(lease);
        return this.adopt(pending, tally, scoped);
      },
      (error: unknown) => {
        this.countFailure(error, options, tally);
        // A caller that gave up is answered at once, even during close(): its take-back is written already, before the QUIT.
        if (!this.shutdown.signal.aborted || abortedBy(error, options.signal)) {
          this.drain.acquisitionSettled();
          throw error;
        }
        return this.leaveDuringClose(keysOfLock, token, error);
      },
    );
  }

  /** Several keys (or some borrowed): taken one by one in canonical order, all or nothing. */
  private async takeEach(
    pending: Lock,
    toTake: readonly string[],
    leases: Lease[],
    waitUntil: number,
    tally: AcquireTally,
    scoped: boolean,
  ): Promise<Lock> {
    let trying: LockKeys | undefined;
    try {
      for (const [index, k] of toTake.entries()) {
        // Given up between keys: the keys taken so far go back (below).
        if (pending.options.signal?.aborted) throw abortReason(pending.options.signal);
        if (index > 0 && pending.options.onBusy === 'retry' && monotonicNow() >= waitUntil) {
          throw keysNotBegun(pending, toTake, index, tally);
        }
        trying = this.store.keysFor(k);
        leases.push(await acquireOneKey(this.acquireContext, trying, pending.token, pending.options, waitUntil, tally));
        trying = undefined;
        // Watched from its first lease, so keys taken early stay renewed while we wait for the rest.
        this.watchdog.track(pending);
      }
      // Keys taken early (and borrowed ones) may have aged while we waited for the rest.
      const incomplete = toTake.length > 0 ? pending.incomplete(monotonicNow() - tally.startedAt, tally.attempts) : undefined;
      if (incomplete) throw incomplete;
    } catch (error) {
      this.countFailure(error, pending.options, tally);
      this.watchdog.untrack(pending);
      // The keys taken so far go back owner-checked. Not awaited: the caller's answer must not wait a
      // second commandTimeout on a Redis that did not answer the first (the command is already written,
      // so it still reaches Redis before close() sends QUIT).
      if (leases.length > 0) void pending.giveBack().catch(() => undefined);
      if (trying && this.shutdown.signal.aborted && !abortedBy(error, pending.options.signal)) {
        return this.leaveDuringClose(trying, pending.token, error);
      }
      this.drain.acquisitionSettled();
      throw error;
    }
    return this.adopt(pending, tally, scoped);
  }

  /** Every lease is taken: the lock is held from now on, unless close() began meanwhile. */
  private adopt(lock: Lock, tally: AcquireTally, scoped: boolean): Lock | Promise<Lock> {
    if (this.shutdown.signal.aborted && lock.leases.length > 0) {
      this.recordAcquire(lock.options.name, 'closed', tally);
      return this.giveBackDuringClose(lock);
    }
    const tookKeys = lock.leases.length > 0;
    // A handle that only borrowed keys has no lease to renew; its outer lock is watched.
    if (tookKeys) this.watchdog.track(lock);
    lock.markAcquired(scoped);
    // A nested call that only borrowed held keys took nothing: not an acquisition (and its release frees nothing, so
    // counted here it left getStats() with more acquisitions than releases for every nested call).
    if (tookKeys) {
      this.stats.acquired++;
      this.recordAcquire(lock.options.name, 'acquired', tally, lock.fencingToken);
    }
    // A bare nested acquire() that took nothing may be left unreleased (it holds nothing back): held in
    // the drain, every such handle stayed there for good, and close() waited all of shutdownTimeout for
    // it. Its outer lock is drained, and its signal follows that lock's. A scoped one (withLock,
    // @Locked) is always released, and close() may have to settle a release it defers (leaveToLapse).
    if (tookKeys || scoped) this.drain.hold(lock);
    this.drain.acquisitionSettled();
    return lock;
  }

  /**
   * A grant that arrived after close() began (an acquire on the wire, a handover to a queued waiter)
   * is given back before close() may close the connection: owner-checked, through the normal release,
   * so a waiter queued elsewhere gets the key at once. The caller gets LockServiceClosedError.
   */
  private giveBackDuringClose(lock: Lock): Promise<never> {
    return lock
      .giveBack()
      .catch(() => false) // unreachable Redis: the lease lapses by TTL; the watchdog never renewed it
      .then(() => {
        this.drain.acquisitionSettled();
        throw new LockServiceClosedError(lock.key, 'it was granted after close() began and has been given back');
      });
  }

  /**
   * An acquisition failed after close() began (typically a waiter woken by it). Its attempts may have
   * left a place in the queue, or a handover we never heard of: take both back (owner-checked) and
   * wait for that, so close() closes the connection only after it reached Redis.
   */
  private async leaveDuringClose(keys: LockKeys, token: string, error: unknown): Promise<never> {
    try {
      await this.store.abandon(keys, token);
    } catch {
      // Unreachable Redis: the place in the queue lapses after waiterLease, a handed-over lease by its TTL.
    } finally {
      this.drain.acquisitionSettled();
    }
    throw error;
  }

  /** Inside `withLock`/`@Locked`: the keys this call chain already holds are borrowed from its locks, the rest taken. */
  private splitReentrant(keys: readonly string[]): { toTake: string[]; outer: Lock[] } {
    const outer = new Set<Lock>();
    const toTake: string[] = [];
    for (const k of keys) {
      const holder = heldInContext(this.engineId, k);
      if (holder?.isHeld()) outer.add(holder);
      else toTake.push(k);
    }
    return { toTake, outer: [...outer] };
  }

  forget(lock: Lock): void {
    this.drain.forget(lock);
  }

  /**
   * Reentrancy is per LockService and per async context (lock-context.ts): a nested call made after a bare
   * acquire(), or under another LockService's lock on the same Redis (two lock modules), waits for its own
   * caller until waitTimeout. When a lock of this process holds the key, the timeout says so, instead of
   * blaming another owner.
   */
  private heldInProcess(keys: LockKeys): string | undefined {
    const found = this.drain.heldInProcess(keys.lock);
    if (!found) return undefined;
    const by = found.ownService ? 'this LockService' : `another LockService of this process (another lock module on ${this.backend.location})`;
    return (
      `It is held by ${by}, taken ${Math.round(monotonicNow() - found.lock.acquiredAt)} ms ago outside this call's async context. ` +
      `If this call runs under that hold (after a bare acquire(), or inside another LockService's lock), it waited for itself: ` +
      `nested calls are reentrant only inside withLock() or @Locked of the same LockService, so take the outer lock with ` +
      `withLock()${found.ownService ? '' : ' and use one lock module'}. Otherwise another caller of this process held it the whole wait`
    );
  }

  private countFailure(error: unknown, options: ResolvedLockOptions, tally: AcquireTally): void {
    const outcome = abortedBy(error, options.signal) ? 'aborted' : failureOutcome(error);
    if (outcome === 'busy') this.stats.busy++;
    else if (outcome === 'timeout') this.stats.timeouts++;
    else if (error instanceof LockConnectionError) this.stats.connectionErrors++;
    // No attempt sent: nothing was asked of Redis, nothing to report; except a call that close() turned
    // away before its first attempt, which is counted like a call refused after close() (see take()).
    if (tally.attempts > 0 || outcome === 'closed') this.recordAcquire(options.name, outcome, tally);
  }

  private recordAcquire(name: string, outcome: AcquireOutcome, tally: AcquireTally, fencingToken?: number): void {
    const { startedAt, attempts, waited } = tally;
    this.metrics.acquireFinished({ name, outcome, startedAt, endedAt: monotonicNow(), waited, attempts, fencingToken });
  }

  private async doDrain(): Promise<void> {
    const { shutdownTimeout } = this.settings;
    this.shutdown.abort();
    for (const lock of this.drain.held) lock.noticeShutdown(new LockLostError(lock.key, 'shutdown', shutdownNotice(shutdownTimeout)));
    // The watchdog keeps renewing while the work finishes; releases and given-back grants empty the
    // drain. A release leaves the drain as its command is written: it reaches Redis before our QUIT.
    const drained = await this.drain.untilIdle(shutdownTimeout);
    this.closed = true;
    if (!drained) this.leaveToLapse();
    this.drain.retire();
    this.watchdog.stop();
  }

  /** Work still running past shutdownTimeout keeps its keys: deleting them would let another holder in beside it. */
  private leaveToLapse(): void {
    for (const lock of this.drain.held) {
      lock.stopRenewing('shutdown');
      lock.dropDeferredRelease();
      if (lock.leases.length === 0) continue; // a nested handle: its outer lock is reported
      this.logger.error(
        `Lock "${lock.keys.join('", "')}" was still held by running work after shutdownTimeout (${this.settings.shutdownTimeout} ms). ` +
          `It was not released under that work: renewals stopped and its lease lapses by TTL (in about ${Math.max(0, Math.round(lock.deadline - monotonicNow()))} ms). ` +
          `Stop the work when lock.signal aborts, or raise shutdownTimeout.`,
      );
    }
  }
}

/**
 * A thenable that is not a native promise (a Prisma, Knex or Mongoose query) starts its work when its `then`
 * is called. The `await` after runInLockContext() would call it outside the lock context: its work ran under
 * the lock but with currentLock() undefined, and a nested call on the same key waited for itself. So `then` is
 * called here, inside the context. A native promise's `then` runs no user code: returned as it is, at no cost.
 */
function startInContext<T>(value: T | Promise<T>): T | Promise<T> {
  if (value instanceof Promise) return value;
  const then = thenOf(value);
  if (!then) return value;
  return new Promise<T>((resolve, reject) => void Reflect.apply(then, value, [resolve, reject]));
}

/**
 * `closed` when close() ended the call: a normal shutdown, on every rolling deploy, is not Redis trouble, and
 * counted as `error` it paged whoever alerts on the error rate. Anything else but busy and timed out (Redis
 * unreachable or too slow) is an error.
 */
const failureOutcome = (error: unknown): AcquireOutcome =>
  error instanceof LockBusyError
    ? 'busy'
    : error instanceof LockTimeoutError
      ? 'timeout'
      : error instanceof LockServiceClosedError
        ? 'closed'
        : 'error';

const shutdownNotice = (shutdownTimeout: number) =>
  `the LockService is shutting down; finish or stop the guarded work within shutdownTimeout (${shutdownTimeout} ms). ` +
  `The lock stays held and renewed until the work releases it; work still running after that keeps the key only until its lease runs out`;

/**
 * `waitTimeout` bounds a waiting acquisition whatever its keys: it ran out before `toTake[next]` and the keys after it
 * were tried (each key costs at least one round trip, and an earlier one may have waited). As for one key, only an
 * attempt begun before the bound may end after it.
 */
function keysNotBegun(lock: Lock, toTake: readonly string[], next: number, tally: AcquireTally): LockTimeoutError {
  const rest = toTake.length - next - 1;
  return new LockTimeoutError(
    toTake[next],
    monotonicNow() - tally.startedAt,
    tally.attempts,
    `waitTimeout (${lock.options.waitTimeout} ms) ran out after ${next} of the ${toTake.length} keys this call takes were taken, ` +
      `before "${toTake[next]}"${rest > 0 ? ` and ${rest} more` : ''} could be tried (each key costs at least one round trip to Redis); ` +
      'nothing ran under the lock and the keys taken were given back. Raise waitTimeout, or lock fewer keys at once',
  );
}
