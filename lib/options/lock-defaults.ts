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
} as const;
