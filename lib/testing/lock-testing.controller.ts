import { Inject, Injectable, Optional } from '@nestjs/common';
import { DISTRIBUTED_LOCK_OPTIONS } from '../distributed-lock.module-definition';
import { LockKeyError } from '../errors/lock-key.error';
import { LOCK_DEFAULTS } from '../options/lock-defaults';
import { resolveKeyPrefix } from '../options/key-prefix';
import { monotonicNow } from '../time/clock';
import { DistributedLockError } from '../errors/distributed-lock.error';
import { describeValue } from '../errors/describe-value';
import { normalizeKeys } from '../keys/normalize-keys';
import { LockService } from '../lock.service';
import { MAX_TIMER_MS } from '../options/limits';
import { assertTtl } from '../options/validate-options';
import { assertKnownKeys } from '../options/known-keys';
import type { DeferQueueFactory } from '../defer/defer-job-queue';
import type { DeferredJobSnapshot } from './deferred-job-snapshot';
import { MemoryDeferQueue } from './memory-defer-queue';
import { memoryBackend } from './memory-backend';
import { MemoryLockSpace, memoryLockName } from './memory-lock-space';
import type { DistributedLockTestingModuleOptions } from './distributed-lock-testing-module-options.interface';

/** A key held by "someone else" (another instance of the service, say), made by `LockTestingController.hold`. */
export interface HeldElsewhere {
  readonly key: string;
  readonly fencingToken: number;
  /** Lets go of the key; the first waiter gets it at once, as from any release. False when the hold had already lapsed or been expired. */
  release(): boolean;
}

let holds = 0;

const HOLD_OPTION_KEYS = ['ttl'] as const;

/**
 * The in-memory lock store of one `DistributedLockTestingModule`, and the levers a test needs that
 * real code never pulls: make a key busy (`hold`), make a held lock lost (`expire`), look inside
 * (`isLocked`, `waiting`, `deferredJobs`, `deferredJobsSettled`). Every LockService of the module (and each one `createService` makes)
 * shares these locks, as instances of a service share one Redis; as there, a service with another `keyPrefix` has
 * other locks. The levers act under the module's `keyPrefix`.
 */
@Injectable()
export class LockTestingController {
  private readonly space = new MemoryLockSpace();
  /** The module's keyPrefix (the default without a module): the namespace of hold, expire, isLocked and waiting. */
  private readonly keyPrefix: string;
  /** @internal The backend of every LockService on these locks. */
  readonly backend = memoryBackend(this.space);
  /** The module's defer queue, made at its init when it has a `defer` option. */
  private deferQueue?: MemoryDeferQueue;
  /** @internal The queues of the module's LockDeferCoordinator: in process, watched by deferredJobs(). */
  readonly deferQueues: DeferQueueFactory = {
    moduleName: 'DistributedLockTestingModule',
    create: (context) => (this.deferQueue = new MemoryDeferQueue(context)),
  };

  constructor(@Optional() @Inject(DISTRIBUTED_LOCK_OPTIONS) options?: DistributedLockTestingModuleOptions) {
    this.keyPrefix = resolveKeyPrefix(options?.keyPrefix ?? LOCK_DEFAULTS.keyPrefix);
  }

  /**
   * A LockService on these locks, outside Nest (or a second "instance" of the application next to the
   * module's). Close it when the test ends: `await service.close()`.
   */
  createService(options: DistributedLockTestingModuleOptions = {}): LockService {
    // Under the module's keyPrefix unless told otherwise: a second instance of the service shares its locks.
    return new LockService({ keyPrefix: this.keyPrefix, ...options }, this.backend);
  }

  /**
   * Makes `key` busy, held by someone outside the application, for `ttl` ms (default: until
   * `release()`): `'throw'` calls get `LockBusyError`, `'fail-fast'` their fallback, `'retry'` calls
   * queue (FIFO) and get it on `release()`, or when the ttl runs out, or time out.
   * Throws if `key` is already held.
   */
  hold(key: string, options: { ttl?: number } = {}): HeldElsewhere {
    const k = this.oneKey('hold', key);
    if (typeof options !== 'object' || options === null || Array.isArray(options)) {
      throw new DistributedLockError(`hold("${k}", options): expected { ttl? } or nothing, got ${describeValue(options)}.`);
    }
    // A misspelt ttl (`{ TTL: 100 }`) would otherwise hold the key until release(), and the test wait for a lapse that never comes.
    assertKnownKeys(`hold("${k}", options)`, options, HOLD_OPTION_KEYS);
    const ttl = options.ttl === undefined ? MAX_TIMER_MS : assertTtl('hold(key, { ttl })', options.ttl);
    const now = monotonicNow();
    const state = this.space.stateOf(this.nameOf(k), now);
    if (state.holder) {
      throw new DistributedLockError(
        `hold("${k}"): the key is already held (by the application or an earlier hold()). Release or expire() it first.`,
      );
    }
    // Free but promised: on Redis another instance's acquire is answered busy behind a live queued waiter, so
    // a hold taken now would jump the FIFO queue in a way production cannot.
    if (state.queue.some((token) => state.placeUntil(token) > now)) {
      throw new DistributedLockError(
        `hold("${k}"): the key is free but promised to a call queued for it (its holder's lease ran out), which gets it at its ` +
          `next attempt; another instance could not take it ahead of that call either. Hold the key before the call queues, or after it is served.`,
      );
    }
    const token = `elsewhere.${ttl}.${++holds}`;
    state.holder = { token, expiresAt: now + ttl };
    const fencingToken = this.space.nextFence(state, now);
    return { key: k, fencingToken, release: () => this.takeAway(k, token) };
  }

  /**
   * Makes whoever holds `key` lose it now, as if its lease had run out unrenewed (a paused process, a
   * Redis failover): the key goes to the first waiter at once (or is free), and the holder finds out
   * the way it would in production: its watchdog's next renewal (within a third of its ttl) aborts
   * `lock.signal` with `LockLostError`; its `release()` resolves false. Returns whether `key` was held.
   */
  expire(key: string): boolean {
    const k = this.oneKey('expire', key);
    return this.takeAway(k, undefined);
  }

  /** Whether anyone (the application or a `hold`) holds `key` now. */
  isLocked(key: string): boolean {
    const k = this.oneKey('isLocked', key);
    return this.space.stateOf(this.nameOf(k), monotonicNow()).holder !== undefined;
  }

  /** How many calls are queued for `key` (places not lapsed): lets a test wait until a waiter is in line. */
  waiting(key: string): number {
    const k = this.oneKey('waiting', key);
    const now = monotonicNow();
    const state = this.space.stateOf(this.nameOf(k), now);
    return state.queue.filter((t) => state.placeUntil(t) > now).length;
  }

  /**
   * The jobs `@Locked(…, { onBusy: 'defer' })` calls of this module deferred so far (busy key: the call
   * answered `Deferred`), oldest first, with their state: `waiting`, `delayed` (waiting out its backoff
   * after a failed run), `active`, `completed` (with `result`) or `failed` for good (with `failedReason`).
   */
  deferredJobs(): DeferredJobSnapshot[] {
    return this.deferQueue?.snapshots() ?? [];
  }

  /**
   * Resolves once every job deferred so far has completed or failed for good, retries included (a job
   * deferred later is not waited for), with their snapshots as `deferredJobs()` gives them. Rejects with
   * `DistributedLockError` when some will never run here: `defer.worker: false`, or the module closed.
   * Under `jest.useFakeTimers()`, a backoff waits on the faked clock: advance it.
   */
  deferredJobsSettled(): Promise<DeferredJobSnapshot[]> {
    return this.deferQueue?.settled() ?? Promise.resolve([]);
  }

  /** Ends the hold of `token` (any holder when undefined) and passes the key on, as RELEASE_SCRIPT does. */
  private takeAway(key: string, token: string | undefined): boolean {
    const now = monotonicNow();
    const name = this.nameOf(key);
    const state = this.space.stateOf(name, now);
    if (!state.holder || (token !== undefined && state.holder.token !== token)) return false;
    if (this.space.grantNextWaiter(name, state, now) !== 'granted') state.holder = undefined;
    return true;
  }

  private nameOf(key: string): string {
    return memoryLockName(this.keyPrefix, key);
  }

  /** One key, checked as LockService checks it: a list would be answered for its first key only (as LockService.isLocked refuses it). */
  private oneKey(lever: string, key: unknown): string {
    if (typeof key !== 'string') {
      throw new LockKeyError(`${lever}(key): expected one key (a string), got ${describeValue(key)}. Call it once per key.`);
    }
    return normalizeKeys(key)[0];
  }
}
