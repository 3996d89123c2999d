/** Counters a production operator wants on a dashboard. */
export interface LockStats {
  acquired: number;
  released: number;
  /** release() found the lock already expired or owned by someone else (nothing was deleted). */
  releaseFailures: number;
  lost: number;
  renewals: number;
  renewalErrors: number;
  busy: number;
  timeouts: number;
  connectionErrors: number;
}

/** @internal */
export const emptyStats = (): LockStats => ({
  acquired: 0,
  released: 0,
  releaseFailures: 0,
  lost: 0,
  renewals: 0,
  renewalErrors: 0,
  busy: 0,
  timeouts: 0,
  connectionErrors: 0,
});
