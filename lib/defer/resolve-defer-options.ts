import { describeValue } from '../errors/describe-value';
import { DEFER_OPTION_KEYS, assertKnownKeys } from '../options/known-keys';
import { LockOptionsError } from '../errors/lock-options.error';
import { DEFER_DEFAULTS } from '../options/lock-defaults';
import { assertBoolean, assertCount, assertIntegerMs } from '../options/validate-options';
import type { DeferModuleOptions, ResolvedDeferOptions } from '../options/defer-options.interface';

const MAX_COUNT = 1000;

/** Validates the module's `defer` option (before any Redis command); `undefined` when deferring is not configured. */
export function resolveDeferOptions(options: DeferModuleOptions | undefined): ResolvedDeferOptions | undefined {
  if (options === undefined) return undefined;
  if (typeof options !== 'object' || options === null)
    throw new LockOptionsError('defer', `expected an options object, got ${describeValue(options)}.`);
  assertKnownKeys('defer', options, DEFER_OPTION_KEYS);
  const o = { ...DEFER_DEFAULTS, ...stripUndefined(options) };
  if (typeof o.queueName !== 'string' || !/^[A-Za-z0-9_.-]{1,100}$/.test(o.queueName)) {
    throw new LockOptionsError('defer.queueName', `expected 1 to 100 letters, digits, '_', '.' or '-', got ${describeValue(o.queueName)}.`);
  }
  return {
    queueName: o.queueName,
    concurrency: assertCount('defer.concurrency', o.concurrency, 1, MAX_COUNT),
    worker: assertBoolean('defer.worker', o.worker),
    attempts: assertCount('defer.attempts', o.attempts, 1, MAX_COUNT),
    backoff: assertIntegerMs('defer.backoff', o.backoff, 0),
    jobLease: assertIntegerMs('defer.jobLease', o.jobLease, 100),
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
