import type { DistributedLockModuleOptions } from './distributed-lock-module-options.interface';
import type { LockOptions, OnBusyPolicy } from './lock-options.interface';
import type { LockHandle } from './lock-handle.interface';
import type { LockLostError } from '../errors/lock-lost.error';
import { LockOptionsError } from '../errors/lock-options.error';
import { resolveKeyPrefix } from './key-prefix';
import { LOCK_DEFAULTS } from './lock-defaults';
import { LOCK_OPTION_KEYS, MODULE_OPTION_KEYS, RETRY_DELAY_KEYS, assertKnownKeys } from './known-keys';
import {
  assertAbortSignal,
  assertBoolean,
  assertCount,
  assertFunctionOrUndefined,
  assertIntegerMs,
  assertLockName,
  assertOneOf,
  assertOptionsObject,
  assertTtl,
  given,
} from './validate-options';

/** Waiters refresh their place every third of waiterLease; below this, refreshes would be timer noise. */
const MIN_WAITER_LEASE_MS = 30;

const POLICIES: readonly OnBusyPolicy[] = ['retry', 'throw', 'fail-fast'];
/** More replicas than any real deployment runs: a larger value is a typo. */
const MAX_REPLICA_ACKS = 100;

/** Per-call options after defaults and validation: every field is set. Shared between calls: never mutate. */
export interface ResolvedLockOptions {
  /** Metric name of the lock (LockOptions.name): bounded, never the key. */
  name: string;
  ttl: number;
  onBusy: OnBusyPolicy;
  waitTimeout: number;
  watchdog: boolean;
  maxHold: number;
  minHold: number;
  retryDelay: { min: number; max: number };
  onLockLost?(this: void, lock: LockHandle, error: LockLostError): void;
  /** Per call only (LockOptions.signal): never a module default. */
  signal?: AbortSignal;
}

/** Module-level settings after defaults and validation. */
export interface ResolvedModuleOptions {
  keyPrefix: string;
  commandTimeout: number;
  waiterLease: number;
  shutdownTimeout: number;
  /** 0: off. */
  replicaAcks: number;
  replicaAckTimeout: number;
  requireRedisAtStartup: boolean;
  startupTimeout: number;
  httpErrors: boolean;
  defaults: ResolvedLockOptions;
}

/** Merges `overrides` over `base` and validates the result; the only place defaults are applied. */
export function resolveLockOptions(
  base: ResolvedLockOptions,
  overrides: LockOptions | undefined,
  where: string,
  /** The keys `overrides` may have; the module's options are checked against their own list by the caller. */
  knownKeys: readonly string[] | null = LOCK_OPTION_KEYS,
): ResolvedLockOptions {
  // The common call passes no options: the (already validated, never mutated) base serves as is.
  if (overrides === undefined) return base;
  assertOptionsObject(where, overrides);
  if (knownKeys) assertKnownKeys(where, overrides, knownKeys);
  const o = overrides;
  if (o.retryDelay !== undefined) {
    assertOptionsObject(`${where}.retryDelay`, o.retryDelay);
    assertKnownKeys(`${where}.retryDelay`, o.retryDelay, RETRY_DELAY_KEYS);
  }
  const retry = o.retryDelay ?? {};
  if ((o.onBusy as string) === 'defer') {
    throw new LockOptionsError(`${where}.onBusy`, "'defer' is set per @Locked method (the call runs again later from a queue), not here.");
  }
  const resolved: ResolvedLockOptions = {
    name: o.name === undefined ? base.name : assertLockName(`${where}.name`, o.name),
    ttl: assertTtl(`${where}.ttl`, given(o.ttl, base.ttl)),
    onBusy: assertOneOf(`${where}.onBusy`, given(o.onBusy, base.onBusy), POLICIES),
    waitTimeout: assertIntegerMs(`${where}.waitTimeout`, given(o.waitTimeout, base.waitTimeout), 0),
    watchdog: assertBoolean(`${where}.watchdog`, given(o.watchdog, base.watchdog)),
    maxHold: assertIntegerMs(`${where}.maxHold`, given(o.maxHold, base.maxHold), 1),
    minHold: assertIntegerMs(`${where}.minHold`, given(o.minHold, base.minHold), 0),
    retryDelay: {
      min: assertIntegerMs(`${where}.retryDelay.min`, given(retry.min, base.retryDelay.min), 1),
      max: assertIntegerMs(`${where}.retryDelay.max`, given(retry.max, base.retryDelay.max), 1),
    },
    onLockLost: assertFunctionOrUndefined(`${where}.onLockLost`, given(o.onLockLost, base.onLockLost)),
  };
  if (o.signal !== undefined) resolved.signal = assertAbortSignal(`${where}.signal`, o.signal);
  if (resolved.retryDelay.max < resolved.retryDelay.min) {
    throw new LockOptionsError(
      `${where}.retryDelay.max`,
      `must be at least retryDelay.min (${resolved.retryDelay.min}), got ${resolved.retryDelay.max}.`,
    );
  }
  if (resolved.minHold > resolved.maxHold) {
    throw new LockOptionsError(
      `${where}.minHold`,
      `(${resolved.minHold} ms) must not exceed maxHold (${resolved.maxHold} ms): a release would keep the key longer than any holder may hold it. ` +
        'Lower minHold or raise maxHold.',
    );
  }
  return resolved;
}

/** `lock.name` of a call that names no kind of lock: one bounded value rather than anything derived from the key. */
export const MANUAL_LOCK_NAME = 'manual';

const BUILT_IN: ResolvedLockOptions = {
  name: MANUAL_LOCK_NAME,
  ttl: LOCK_DEFAULTS.ttl,
  onBusy: LOCK_DEFAULTS.onBusy,
  waitTimeout: LOCK_DEFAULTS.waitTimeout,
  watchdog: LOCK_DEFAULTS.watchdog,
  maxHold: LOCK_DEFAULTS.maxHold,
  minHold: LOCK_DEFAULTS.minHold,
  retryDelay: { ...LOCK_DEFAULTS.retryDelay },
};

export function resolveModuleOptions(options: DistributedLockModuleOptions): ResolvedModuleOptions {
  assertOptionsObject('DistributedLockModule options', options);
  if ((options as LockOptions).name !== undefined) {
    throw new LockOptionsError('name', 'is not a module-wide option: it names one kind of lock; pass it per call or in @Locked options.');
  }
  assertNoIsGlobal(options);
  assertKnownKeys('DistributedLockModule options', options, MODULE_OPTION_KEYS);
  const keyPrefix = resolveKeyPrefix(given(options.keyPrefix, LOCK_DEFAULTS.keyPrefix));
  const commandTimeout = assertIntegerMs('commandTimeout', given(options.commandTimeout, LOCK_DEFAULTS.commandTimeout), 1);
  const replicaAcks = assertCount('replicaAcks', given(options.replicaAcks, LOCK_DEFAULTS.replicaAcks), 0, MAX_REPLICA_ACKS);
  const replicaAckTimeout = assertIntegerMs('replicaAckTimeout', given(options.replicaAckTimeout, LOCK_DEFAULTS.replicaAckTimeout), 1);
  if (replicaAcks > 0) assertReplicaAckTimeout(replicaAckTimeout, commandTimeout);
  return {
    keyPrefix,
    commandTimeout,
    waiterLease: assertIntegerMs('waiterLease', given(options.waiterLease, LOCK_DEFAULTS.waiterLease), MIN_WAITER_LEASE_MS),
    shutdownTimeout: assertIntegerMs('shutdownTimeout', given(options.shutdownTimeout, LOCK_DEFAULTS.shutdownTimeout), 0),
    replicaAcks,
    replicaAckTimeout,
    requireRedisAtStartup: assertBoolean('requireRedisAtStartup', given(options.requireRedisAtStartup, LOCK_DEFAULTS.requireRedisAtStartup)),
    startupTimeout: assertIntegerMs('startupTimeout', given(options.startupTimeout, LOCK_DEFAULTS.startupTimeout), 1),
    httpErrors: assertBoolean('httpErrors', given(options.httpErrors, LOCK_DEFAULTS.httpErrors)),
    defaults: resolveLockOptions(BUILT_IN, options, 'DistributedLockModule', null),
  };
}

/**
 * `isGlobal` never reaches a LockService through Nest: forRoot's module definition takes it out of the options it
 * provides (an extra of ConfigurableModuleBuilder), and forRootAsync refuses one its factory returns
 * (for-root-async-options.ts). One here was given to a LockService made by hand, which belongs to no module: it was
 * accepted (a known key, for the near-miss suggestion of a misspelt forRoot option) and did nothing.
 */
function assertNoIsGlobal(options: DistributedLockModuleOptions): void {
  const { isGlobal } = options as { isGlobal?: unknown };
  if (isGlobal === undefined) return;
  throw new LockOptionsError(
    'isGlobal',
    `is an option of DistributedLockModule.forRoot and forRootAsync: it decides whether the module Nest builds is global ` +
      `(true, the default) or serves only the modules that import it (false). A LockService made by hand (new LockService(options), ` +
      `or the testing module's createService(options)) belongs to no module, so nothing would read it: leave isGlobal out, or ` +
      `import DistributedLockModule.forRoot({ isGlobal, redis, … }) and inject the LockService it provides.`,
  );
}

/**
 * The confirmation must end before the command's own bound, or the caller would see a timeout instead
 * of how many replicas confirmed. (What else replicaAcks needs is the Redis backend's: lib/redis/redis-backend.ts.)
 */
function assertReplicaAckTimeout(replicaAckTimeout: number, commandTimeout: number): void {
  if (replicaAckTimeout >= commandTimeout) {
    throw new LockOptionsError('replicaAckTimeout', `must be below commandTimeout (${commandTimeout} ms), got ${replicaAckTimeout}.`);
  }
}
