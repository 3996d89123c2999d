import { LockOptionsError } from '../errors/lock-options.error';
import { nearMissOf } from './near-miss-keys';

/** Per-call options: what `acquire`, `tryAcquire`, `withLock` and `@Locked` read (the last two also a fallback). */
export const LOCK_OPTION_KEYS = [
  'name',
  'ttl',
  'onBusy',
  'waitTimeout',
  'watchdog',
  'maxHold',
  'minHold',
  'retryDelay',
  'onLockLost',
  'fallback',
  'signal',
] as const;

/** Module options: its own, and every per-call option but `name` as the default of every call. */
export const MODULE_OPTION_KEYS = [
  ...LOCK_OPTION_KEYS.filter((k) => k !== 'name' && k !== 'fallback' && k !== 'signal'),
  'redis',
  'nodes',
  'nodeRecoveryDelay',
  'keyPrefix',
  'commandTimeout',
  'waiterLease',
  'shutdownTimeout',
  'replicaAcks',
  'replicaAckTimeout',
  'requireRedisAtStartup',
  'startupTimeout',
  'httpErrors',
  'defer',
  // forRoot's extra: Nest takes it out before the options reach a LockService, and one given to a LockService made
  // by hand is refused (resolve-options.ts). Known, so that a misspelt one in forRoot is told its name.
  'isGlobal',
] as const;

export const RETRY_DELAY_KEYS = ['min', 'max'] as const;

export const DEFER_OPTION_KEYS = ['queueName', 'concurrency', 'worker', 'attempts', 'backoff', 'jobLease'] as const;

/** What `LockHealthIndicator.isHealthy(key, options)` reads (lib/terminus). */
export const HEALTH_OPTION_KEYS = ['maxRoundTrip', 'renewalErrorWindow'] as const;

/**
 * Refuses a key the library does not read. A misspelt option (`waitTimout`) would otherwise be ignored
 * and its default used without a word: the caller believes a bound is set that is not.
 */
export function assertKnownKeys(where: string, options: object, known: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    // Only a suggestion (the key is refused whatever it is): short names are compared by edits too.
    const near = nearMissOf(key, known, 0);
    throw new LockOptionsError(
      `${where}.${key}`,
      `is not an option${near ? `; did you mean ${near}?` : '.'} The options are: ${known.filter((k) => k !== 'isGlobal').join(', ')}.`,
    );
  }
}
