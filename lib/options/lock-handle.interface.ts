/**
 * The public face of a held lock, as callbacks in the options see it. `Lock` implements it; it is
 * declared here so option types do not depend on the engine that implements them.
 */
export interface LockHandle {
  /** First key in canonical order (the only key of a single-key lock). */
  readonly key: string;
  /** Every key of this lock, in the canonical order they were taken. */
  readonly keys: readonly string[];
  /** Owner token stored in Redis; proves ownership to the owner-checked scripts. */
  readonly token: string;
  /** Fencing token of `key`: strictly greater than every token handed out for that key before. */
  readonly fencingToken: number;
  /** Fencing token of each key. */
  readonly fencingTokens: ReadonlyMap<string, number>;
  /** Monotonic time (ms) the lock was acquired. */
  readonly acquiredAt: number;
  /**
   * Aborts when the lease is lost, the lock released, or the service starts shutting down. Reading it checks the
   * lease's deadline first (a nested handle's: the outer locks' it borrows keys from too).
   */
  readonly signal: AbortSignal;
  /** True while every lease is still valid by this process's monotonic clock. */
  isHeld(): boolean;
  /**
   * Sets the lease of every key to `ttl` (default: the acquire's ttl), owner-checked. A nested handle extends the
   * outer locks it borrows keys from too: to `ttl` when given, otherwise each by its own acquire's ttl.
   */
  extend(ttl?: number): Promise<void>;
  /** Gives the keys back; false when the lease had already been lost. */
  release(): Promise<boolean>;
}
