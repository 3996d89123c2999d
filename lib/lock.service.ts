import { setMaxListeners } from 'node:events';
import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { AcquireContext, acquireOneKey } from './acquire-one-key';
import { DISTRIBUTED_LOCK_OPTIONS } from './distributed-lock.module-definition';
import { DistributedLockError } from './errors/distributed-lock.error';
import { LockBusyError } from './errors/lock-busy.error';
import { LockConnectionError } from './errors/lock-connection.error';
import { LockTimeoutError } from './errors/lock-timeout.error';
import type { DistributedLockModuleOptions } from './interfaces/distributed-lock-module-options.interface';
import type { LockOptions, WithLockOptions } from './interfaces/lock-options.interface';
import { monotonicNow } from './internal/clock';
import { normalizeKeys } from './internal/normalize-keys';
import { newOwnerToken, newServiceId } from './internal/token';
import type { Lease } from './lease';
import { Lock } from './lock';
import { heldInContext, insideLockContext, runInLockContext } from './lock-context';
import { LockRuntime, LockStats, emptyStats } from './lock-runtime';
import { ResolvedLockOptions, ResolvedModuleOptions, resolveLockOptions, resolveModuleOptions } from './options/resolve-options';
import { reportConnectionHealth } from './redis/connection-health';
import { ConnectionState } from './redis/connection-state';
import { RedisConnection, closeConnection, createRedisConnection, waitUntilReady } from './redis/redis-connection';
import { RedisLockStore } from './redis/redis-lock-store';
import { ReplicaAcks } from './redis/replica-acks';
import { WakeChannel } from './redis/wake-channel';
import { Watchdog } from './watchdog';

let nextServiceId = 1;
const NO_LOCKS: readonly Lock[] = Object.freeze([]);

/**
 * Acquire, wait for and release distributed locks on Redis.
 *
 * Usable without Nest too: `new LockService({ redis: 'redis://…' })`, then `await service.close()`.
 */
@Injectable()
export class LockService implements OnModuleInit, OnApplicationShutdown, LockRuntime {
  /** @internal */ readonly id = nextServiceId++;
  /** @internal */ readonly store: RedisLockStore;
  /** @internal */ readonly watchdog: Watchdog;
  /** @internal */ readonly logger = new Logger('DistributedLock');
  /** @internal */ readonly stats: LockStats = emptyStats();
  /** @internal */ readonly settings: ResolvedModuleOptions;

  private readonly connection: RedisConnection;
  private readonly connectionState: ConnectionState;
  private readonly wakeChannel: WakeChannel;
  /** Prefix of every owner token of this service; names its wake channel. */
  private readonly serviceId = newServiceId();
  private readonly shutdown = new AbortController();
  private readonly held = new Set<Lock>();
  /** What every acquisition needs; the same for all of them. */
  private readonly acquireContext: AcquireContext;
  private closing?: Promise<void>;

  constructor(@Inject(DISTRIBUTED_LOCK_OPTIONS) options: DistributedLockModuleOptions) {
    this.settings = resolveModuleOptions(options);
    // Every waiter listens for shutdown; hundreds of concurrent waiters are normal, not a leak.
    setMaxListeners(0, this.shutdown.signal);
    this.connection = createRedisConnection(options.redis, this.settings.commandTimeout);
    const { client, owned } = this.connection;
    this.connectionState = new ConnectionState(client, owned);
    if (owned) reportConnectionHealth(client, this.connectionState, this.logger, this.shutdown.signal);
    const { keyPrefix, commandTimeout, waiterLease, replicaAcks, replicaAckTimeout } = this.settings;
    const acks = replicaAcks > 0 ? new ReplicaAcks(replicaAcks, replicaAckTimeout) : undefined;
    this.store = new RedisLockStore(client, keyPrefix, commandTimeout, waiterLease, acks, this.connectionState);
    this.wakeChannel = new WakeChannel(client, this.store.channelPrefix + this.serviceId, commandTimeout, this.logger);
    this.watchdog = new Watchdog(this.store, this.logger, this.stats);
    this.acquireContext = { store: this.store, wakeChannel: this.wakeChannel, waiterLease, shutdown: this.shutdown.signal };
  }

  /** Waits (bounded) for the connection, so the first lock of the application does not fail on a handshake in progress. */
  async onModuleInit(): Promise<void> {
    const waitMs = Math.max(this.settings.commandTimeout, 1_000);
    const ready = await waitUntilReady(this.connection.client, waitMs);
    // A failed attempt of a connection we own was already logged as "not reachable", with its reason (connection-health.ts).
    if (!ready && !this.connectionState.reason) {
      this.logger.error(
        `${this.connectionState.target} is not reachable: no connection within ${waitMs} ms of startup. ` +
          `Lock calls fail with LockConnectionError until it is; check the redis option and that the server is running.`,
      );
    }
  }

  async onApplicationShutdown(): Promise<void> {
    await this.close();
  }

  /**
   * Takes the lock on `key` (or all `keys`, all-or-nothing, in canonical order).
   * - `'retry'` waits up to `waitTimeout`, then throws `LockTimeoutError`;
   * - `'throw'` throws `LockBusyError` at once;
   * - `'fail-fast'` (only when given in this call) resolves to `null` when busy.
   * A module-wide `'fail-fast'` default makes `acquire` throw `LockBusyError` instead, so its type stays honest.
   */
  acquire(key: string | readonly string[], options: LockOptions & { onBusy: 'fail-fast' }): Promise<Lock | null>;
  acquire(key: string | readonly string[], options?: LockOptions & { onBusy?: 'retry' | 'throw' }): Promise<Lock>;
  acquire(key: string | readonly string[], options?: LockOptions): Promise<Lock | null> {
    let resolved: ResolvedLockOptions;
    try {
      resolved = this.resolve(options);
    } catch (error) {
      return Promise.reject(error);
    }
    if (options?.onBusy === undefined && resolved.onBusy === 'fail-fast') resolved = { ...resolved, onBusy: 'throw' };
    // No extra async frame on the common path: every await costs microtask turns on each acquire.
    const taking = this.take(key, resolved);
    if (resolved.onBusy !== 'fail-fast') return taking;
    return taking.catch((error: unknown) => {
      if (error instanceof LockBusyError) return null;
      throw error;
    });
  }

  /** One attempt; `null` when the key is busy. Redis trouble still throws `LockConnectionError`. */
  async tryAcquire(key: string | readonly string[], options?: Omit<LockOptions, 'onBusy' | 'waitTimeout'>): Promise<Lock | null> {
    return this.acquire(key, { ...options, onBusy: 'fail-fast' });
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
    if (typeof fn !== 'function') throw new DistributedLockError('withLock(key, fn): fn must be a function.');
    const resolved = this.resolve(options);
    let lock: Lock;
    try {
      lock = await this.take(key, resolved);
    } catch (error) {
      if (error instanceof LockBusyError && resolved.onBusy === 'fail-fast') {
        const fallback = options?.fallback;
        return (typeof fallback === 'function' ? (fallback as () => F)() : fallback) as F;
      }
      throw error;
    }
    let result: T;
    try {
      result = await runInLockContext(this.id, lock, () => fn(lock));
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
    const [k] = normalizeKeys(key);
    return this.store.isLocked(this.store.keysFor(k));
  }

  /** Counters for dashboards: acquisitions, release validation failures, lost leases, renewals. */
  getStats(): Readonly<LockStats> {
    return { ...this.stats };
  }

  /** Stops every watchdog and waiter, releases held locks (bounded), closes connections the module made. */
  close(): Promise<void> {
    this.closing ??= this.doClose();
    return this.closing;
  }

  /** @internal Merges call options over the module defaults (validated before any Redis command). */
  resolve(options: LockOptions | undefined): ResolvedLockOptions {
    return resolveLockOptions(this.settings.defaults, options, 'options');
  }

  private take(key: string | readonly string[], options: ResolvedLockOptions): Promise<Lock> {
    let keys: string[];
    try {
      keys = normalizeKeys(key);
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.shutdown.signal.aborted) return Promise.reject(new DistributedLockError('LockService is closed; no new locks can be acquired.'));
    let toTake: readonly string[] = keys;
    let outer: readonly Lock[] = NO_LOCKS;
    if (insideLockContext()) ({ toTake, outer } = this.splitReentrant(keys));
    const token = newOwnerToken(this.serviceId, options.ttl);
    const leases: Lease[] = [];
    const waitUntil = monotonicNow() + (options.onBusy === 'retry' ? options.waitTimeout : 0);
    const pending = new Lock(token, keys, leases, outer, options, this);
    if (toTake.length !== 1 || outer.length > 0) return this.takeEach(pending, toTake, leases, waitUntil);
    // One key, nothing borrowed (the common case): a plain promise chain, no async frame.
    return acquireOneKey(this.acquireContext, this.store.keysFor(toTake[0]), token, options, waitUntil).then(
      (lease) => {
        leases.push(lease);
        return this.adopt(pending);
      },
      (error: unknown) => {
        this.countFailure(error);
        throw error;
      },
    );
  }

  /** Several keys (or some borrowed): taken one by one in canonical order, all or nothing. */
  private async takeEach(pending: Lock, toTake: readonly string[], leases: Lease[], waitUntil: number): Promise<Lock> {
    try {
      for (const k of toTake) {
        leases.push(await acquireOneKey(this.acquireContext, this.store.keysFor(k), pending.token, pending.options, waitUntil));
        // Watched from its first lease, so keys taken early stay renewed while we wait for the rest.
        this.watchdog.track(pending);
      }
      // Keys taken early (and borrowed ones) may have aged while we waited for the rest.
      if (toTake.length > 0 && !pending.isHeld()) {
        throw new LockConnectionError(`The first keys of "${pending.keys.join('", "')}" expired while waiting for the rest.`, 'acquire');
      }
    } catch (error) {
      this.countFailure(error);
      this.watchdog.untrack(pending);
      if (leases.length > 0) await pending.release().catch(() => undefined);
      throw error;
    }
    return this.adopt(pending);
  }

  /** Every lease is taken: the lock is held from now on. */
  private adopt(lock: Lock): Lock {
    this.watchdog.track(lock);
    lock.markAcquired();
    this.stats.acquired++;
    this.held.add(lock);
    return lock;
  }

  /** Inside `withLock`/`@Locked`: the keys this call chain already holds are borrowed from its locks, the rest taken. */
  private splitReentrant(keys: readonly string[]): { toTake: string[]; outer: Lock[] } {
    const outer = new Set<Lock>();
    const toTake: string[] = [];
    for (const k of keys) {
      const holder = heldInContext(this.id, k);
      if (holder?.isHeld()) outer.add(holder);
      else toTake.push(k);
    }
    return { toTake, outer: [...outer] };
  }

  /** @internal */
  forget(lock: Lock): void {
    this.held.delete(lock);
  }

  private countFailure(error: unknown): void {
    if (error instanceof LockBusyError) this.stats.busy++;
    else if (error instanceof LockTimeoutError) this.stats.timeouts++;
    else if (error instanceof LockConnectionError) this.stats.connectionErrors++;
  }

  private async doClose(): Promise<void> {
    this.shutdown.abort();
    this.watchdog.stop();
    const held = [...this.held];
    this.held.clear();
    const releases = Promise.allSettled(held.map((lock) => lock.release()));
    await raceTimeout(releases, this.settings.shutdownTimeout);
    await this.wakeChannel.close();
    if (this.connection.owned) await closeConnection(this.connection.client, this.settings.shutdownTimeout);
  }
}

async function raceTimeout(promise: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
