import { Inject, Injectable, OnApplicationShutdown, OnModuleInit, Optional } from '@nestjs/common';
import type { Lock } from './core/lock';
import { LOCK_BACKEND, type LockBackendFactory } from './core/lock-backend';
import { LockEngine } from './core/lock-engine';
import type { LockStats } from './core/lock-stats';
import { DISTRIBUTED_LOCK_OPTIONS } from './distributed-lock.module-definition';
import { LockBusyError } from './errors/lock-busy.error';
import type { DistributedLockModuleOptions } from './options/distributed-lock-module-options.interface';
import type { LockOptions, WithLockOptions } from './options/lock-options.interface';
import { assertNoFallback } from './options/fallback-option';
import { assertModuleOptionsGiven } from './options/module-options-given';
import type { ResolvedLockOptions } from './options/resolve-options';
import { assertOptionsObject } from './options/validate-options';

/**
 * Acquire, wait for and release distributed locks on Redis.
 *
 * Usable without Nest too: `new LockService({ redis: 'redis://…' })`, then `await service.close()`.
 */
@Injectable()
export class LockService implements OnModuleInit, OnApplicationShutdown {
  /** @internal The engine behind this façade (see lib/core/lock-engine.ts). */
  readonly engine: LockEngine;

  constructor(
    // Optional only so that a module imported without forRoot fails saying so (options/module-options-given.ts).
    @Optional() @Inject(DISTRIBUTED_LOCK_OPTIONS) options: DistributedLockModuleOptions,
    // Where locks live: Redis unless a module provides a LockBackendFactory (the testing module: memory).
    // Typed `unknown` on purpose: the public declaration shows users no engine internals.
    @Optional() @Inject(LOCK_BACKEND) backend?: unknown,
  ) {
    assertModuleOptionsGiven(options);
    this.engine = new LockEngine(options, (backend as LockBackendFactory | undefined) ?? redisBackend());
  }

  /**
   * Startup: waits up to `startupTimeout` for Redis and rejects with `LockConnectionError` when it cannot be
   * reached (`requireRedisAtStartup`, the default); with `requireRedisAtStartup: false`, returns at once.
   */
  onModuleInit(): Promise<void> {
    return this.engine.ready();
  }

  /**
   * Nest's last shutdown phase: by now the module has drained its locks (on onModuleDestroy, lock-module-drain.ts),
   * so this closes the connections, after every other module's earlier hooks.
   */
  onApplicationShutdown(): Promise<void> {
    return this.close();
  }

  /**
   * Takes the lock on `key` (or all `keys`, all-or-nothing, in canonical order).
   * - `'retry'` waits up to `waitTimeout`, then throws `LockTimeoutError`;
   * - `'throw'` throws `LockBusyError` at once;
   * - `'fail-fast'` (only when given in this call) resolves to `null` when busy.
   * A module-wide `'fail-fast'` default makes `acquire` throw `LockBusyError` instead, so its type stays honest.
   * A `fallback` is refused (`LockOptionsError`): it is what `withLock` resolves to instead of running its work.
   */
  acquire(key: string | readonly string[], options: LockOptions & { onBusy: 'fail-fast' }): Promise<Lock | null>;
  acquire(key: string | readonly string[], options?: LockOptions & { onBusy?: 'retry' | 'throw' }): Promise<Lock>;
  /** A policy known only at run time (a union): `null` is possible, so the type says so. */
  acquire(key: string | readonly string[], options?: LockOptions): Promise<Lock | null>;
  acquire(key: string | readonly string[], options?: LockOptions): Promise<Lock | null> {
    let resolved: ResolvedLockOptions;
    try {
      resolved = this.engine.resolve(options);
      assertNoFallback('acquire', options);
    } catch (error) {
      return Promise.reject(error);
    }
    if (options?.onBusy === undefined && resolved.onBusy === 'fail-fast') resolved = { ...resolved, onBusy: 'throw' };
    // No extra async frame on the common path: every await costs microtask turns on each acquire.
    const taking = this.engine.take(key, resolved);
    if (resolved.onBusy !== 'fail-fast') return taking;
    return taking.catch((error: unknown) => {
      if (error instanceof LockBusyError) return null;
      throw error;
    });
  }

  /** One attempt; `null` when the key is busy (no `fallback`: that is withLock's). Redis trouble still throws `LockConnectionError`. */
  tryAcquire(key: string | readonly string[], options?: Omit<LockOptions, 'onBusy' | 'waitTimeout'>): Promise<Lock | null> {
    try {
      // Spread below, anything would pass as "no options".
      if (options !== undefined) assertOptionsObject('tryAcquire options', options);
      assertNoFallback('tryAcquire', options);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.acquire(key, { ...options, onBusy: 'fail-fast' });
  }

  /**
   * Runs `fn` while holding the lock and releases it afterwards, whatever `fn` does.
   * With `'fail-fast'` a busy key resolves to `fallback` without running `fn`; a `fallback` under any other
   * policy (given, or the module's default) is a `LockOptionsError`, as it would never be used.
   * Inside `fn`, `currentLock()` returns the lock and nested acquisitions of the same keys are reentrant.
   */
  withLock<T, F = undefined>(key: string | readonly string[], fn: (lock: Lock) => T | Promise<T>, options?: WithLockOptions<F>): Promise<T | F> {
    return this.engine.withLock(key, fn, options);
  }

  /** Whether anyone holds `key` right now (a snapshot: it may change the moment it is returned). */
  isLocked(key: string): Promise<boolean> {
    return this.engine.isLocked(key);
  }

  /** Counters for dashboards: acquisitions, release validation failures, lost leases, renewals. */
  getStats(): Readonly<LockStats> {
    return { ...this.engine.stats };
  }

  /**
   * Shuts down without deleting a key under running work: takes no new locks (`LockServiceClosedError`),
   * stops waiters, aborts every held lock's `signal` (`LockLostError`, reason `'shutdown'`) and waits,
   * bounded by `shutdownTimeout`, for that work to release its locks while the watchdog keeps renewing
   * them; a grant that arrives meanwhile is given back. Work still running after the bound keeps its
   * keys: renewals stop and the leases lapse by TTL (logged by key). Then closes connections the module made.
   */
  close(): Promise<void> {
    return this.engine.close();
  }
}

/** Loaded on first use, so an application on the in-memory testing backend never loads ioredis. */
function redisBackend(): LockBackendFactory {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- lazy on purpose (see above)
  return (require('./redis/redis-backend') as typeof import('./redis/redis-backend')).redisBackend;
}
