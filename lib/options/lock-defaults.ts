import type { ResolvedDeferOptions } from './defer-options.interface';

/**
 * The one place where defaults live. The JSDoc `@default` tags of the option interfaces repeat
 * these numbers for readers; the code reads them only from here.
 */
export const LOCK_DEFAULTS = {
  keyPrefix: 'lock:',
  ttl: 30_000,
  onBusy: 'retry',
  waitTimeout: 5_000,
  watchdog: true,
  maxHold: 600_000,
  minHold: 0,
  retryDelay: { min: 25, max: 1_000 },
  commandTimeout: 2_000,
  waiterLease: 3_000,
  shutdownTimeout: 5_000,
  replicaAcks: 0,
  replicaAckTimeout: 500,
  requireRedisAtStartup: true,
  startupTimeout: 10_000,
  httpErrors: true,
} as const;

/** The module's `defer` option, when given: each field it leaves out. */
export const DEFER_DEFAULTS: ResolvedDeferOptions = {
  queueName: 'distributed-lock-deferred',
  concurrency: 1,
  worker: true,
  attempts: 5,
  backoff: 1_000,
  jobLease: 30_000,
};

/** `LockHealthIndicator.isHealthy` options (`maxRoundTrip` defaults to half the module's commandTimeout). */
export const HEALTH_DEFAULTS = {
  renewalErrorWindow: 60_000,
} as const;
