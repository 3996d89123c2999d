import { describeValue } from '../errors/describe-value';
import { LockOptionsError } from '../errors/lock-options.error';
import { MAX_LOCK_NAME_LENGTH, MAX_TIMER_MS, MIN_TTL_MS } from './limits';

/** Validation runs before any Redis command, so a bad value never reaches Redis. */
/**
 * An options object: not null, not an array, not a Promise (options from an async function not awaited), not
 * a built-in whose content is not in its properties (a Map of options, a Date): a spread or a key lookup would
 * read each as "no options", and the defaults would apply unseen. A class instance is read like a plain object.
 */
export function assertOptionsObject(where: string, value: unknown): asserts value is object {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new LockOptionsError(where, `expected an options object, got ${describeValue(value)}.`);
  }
  if (typeof (value as { then?: unknown }).then === 'function') {
    throw new LockOptionsError(where, `expected an options object, got ${describeValue(value)}: await the options before passing them.`);
  }
  if (value instanceof Map) {
    throw new LockOptionsError(
      where,
      `expected an options object, got ${describeValue(value)}: options are read from properties, which a Map's entries are not; pass Object.fromEntries(map).`,
    );
  }
  if (NOT_OPTIONS.some((type) => value instanceof type)) {
    throw new LockOptionsError(
      where,
      `expected an options object, got ${describeValue(value)}: every option would read as not given; pass a plain object.`,
    );
  }
}

/** Built-ins that hold their content outside their properties (the Map has its own hint above). */
const NOT_OPTIONS: readonly (abstract new (...args: never[]) => object)[] = [Set, WeakMap, WeakSet, Date, RegExp];

/**
 * An option's value, or `fallback` when it is not given. Only `undefined` means "not given": null (a config
 * value that is missing, `config.get('X') ?? null`) is validated as given, not read as the default unseen.
 */
export const given = <T>(value: T | undefined, fallback: T): T => (value === undefined ? fallback : value);

export function assertIntegerMs(option: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > MAX_TIMER_MS) {
    throw new LockOptionsError(option, `expected an integer number of milliseconds from ${min} to ${MAX_TIMER_MS}, got ${describeValue(value)}.`);
  }
  return value;
}

/** A lease length (module, per-call or extend ttl): like assertIntegerMs, with the reason for the lower bound. */
export function assertTtl(option: string, value: unknown): number {
  if (typeof value === 'number' && Number.isInteger(value) && value < MIN_TTL_MS) {
    throw new LockOptionsError(
      option,
      `expected an integer number of milliseconds from ${MIN_TTL_MS} to ${MAX_TIMER_MS}, got ${value}. A lease needs at least ` +
        `${MIN_TTL_MS} ms: it counts as valid for ttl − 2 ms − 1 % (allowance for clock drift and timer lateness) minus the ` +
        `round trip to Redis, and the watchdog must renew it at ttl/3 and hear back within that. Raise ttl.`,
    );
  }
  return assertIntegerMs(option, value, MIN_TTL_MS);
}

export function assertCount(option: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new LockOptionsError(option, `expected an integer from ${min} to ${max}, got ${describeValue(value)}.`);
  }
  return value;
}

export function assertOneOf<T extends string>(option: string, value: unknown, allowed: readonly T[]): T {
  if (!allowed.includes(value as T)) {
    throw new LockOptionsError(option, `expected one of ${allowed.map((a) => `'${a}'`).join(', ')}, got ${describeValue(value)}.`);
  }
  return value as T;
}

export function assertBoolean(option: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw new LockOptionsError(option, `expected true or false, got ${describeValue(value)}.`);
  return value;
}

export function assertFunctionOrUndefined<T>(option: string, value: unknown): T | undefined {
  if (value !== undefined && typeof value !== 'function') {
    throw new LockOptionsError(option, `expected a function, got ${describeValue(value)}.`);
  }
  return value as T | undefined;
}

/**
 * An AbortSignal (LockOptions.signal). Told by its shape rather than `instanceof`, so a signal from another
 * realm or an AbortSignal polyfill is accepted: what the wait uses is `aborted`, `reason` and the 'abort' event.
 */
export function assertAbortSignal(option: string, value: unknown): AbortSignal {
  const signal = value as Partial<AbortSignal> | null;
  if (typeof signal !== 'object' || signal === null || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw new LockOptionsError(option, `expected an AbortSignal (an AbortController's signal), got ${describeValue(value)}.`);
  }
  return value as AbortSignal;
}

/** A metric / span name of a lock: a non-empty string of bounded length (see LockOptions.name). */
export function assertLockName(option: string, value: unknown): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_LOCK_NAME_LENGTH) {
    throw new LockOptionsError(
      option,
      `expected a non-empty string of at most ${MAX_LOCK_NAME_LENGTH} characters naming the kind of lock (e.g. 'order-checkout'), got ${describeValue(value)}.`,
    );
  }
  return value;
}
