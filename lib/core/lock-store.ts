import type { StoreProbe } from './store-probe';

/**
 * The names a store gives one user key. The engine treats them as an opaque handle from
 * `LockStore.keysFor` and passes them back to the same store; it reads only these fields.
 */
export interface LockKeys {
  /** The user's key, as given. */
  readonly key: string;
  /** Names the lock in handover messages (a multi-key lock's handovers are routed by token and this). */
  readonly lock: string;
  /** Where the key's last fencing token lives (named in error messages about a damaged token). */
  readonly fence: string;
}

export type AcquireReply =
  /** `validFor`: ms of lease the store had left when it ran the attempt (the ttl, or less for a lock handed to us). */
  | { acquired: true; fence: number; validFor: number }
  /**
   * `holderTtl`: the holder's remaining lease in ms, or -1 "free but promised to a live waiter ahead",
   * -3 "free, stale waiters ahead still being dropped: ask again at once", -4 "no owner holds a
   * majority (Redlock: nodes held by different owners, or not voting yet): ask again soon". `position`: 0 head of the
   * queue, 1 behind it, -1 not queued. `lastFence`: the key's last fencing token when the attempt ran
   * (see waitForTurn: it dates the attempt against a handover).
   */
  | { acquired: false; holderTtl: number; position: number; lastFence: number };

export interface RenewRequest<K extends LockKeys = LockKeys> {
  keys: K;
  token: string;
  ttl: number;
  /** The lease's fencing token: a store that takes a lost key back (Redlock) raises that node's last token to it. */
  fence?: number;
}

/** `handed-over`: the release gave the lock to the next waiter (whose service is being told so). */
export type ReleaseOutcome = 'not-owner' | 'freed' | 'handed-over';

/**
 * Where leases, queues and fencing tokens live: Redis in production (lib/redis/redis-lock-store.ts),
 * memory in tests (lib/testing). Every method is one atomic step on the key's state, owner-checked
 * where it says so; transport trouble rejects with `LockConnectionError`, damaged state with `LockStateError`.
 *
 * A queued waiter's token is `<service id>.<ttl>.<random>` (lib/core/owner-token.ts): a release that
 * hands the lock to it reads from the token which service's wake channel to tell and what lease it asked for.
 */
export interface LockStore {
  keysFor(key: string): LockKeys;

  /**
   * One attempt: takes the lock when it is free and nobody live queued before `token` (FIFO).
   * `joinQueue`: take (or refresh, for the store's waiter lease) a place in the key's queue when busy.
   * `retry`: an earlier attempt of this token queued it, so a release may already have handed the lock over.
   */
  acquire(keys: LockKeys, token: string, ttl: number, joinQueue: boolean, retry: boolean): Promise<AcquireReply>;

  /**
   * A store that bounds leases (Redlock: nodeRecoveryDelay) refuses a call's longer ones with
   * LockOptionsError before anything is sent: the ttl, and minHold (a release before it keeps the key that long).
   */
  assertLeaseOptions?(options: { readonly ttl: number; readonly minHold: number }): void;

  /** Confirms a lock a release handed to `token` (when the backend `confirmsHandovers`); false when it is not ours any more. */
  confirmHandover(keys: LockKeys, token: string, ttl: number): Promise<boolean>;

  /** Owner-checked: hands the lock to the first live waiter (telling its service) or frees it. */
  release(keys: LockKeys, token: string): Promise<ReleaseOutcome>;

  /** Owner-checked: sets the remaining lease to `ttl`. */
  extend(keys: LockKeys, token: string, ttl: number, fence?: number): Promise<boolean>;

  /** Owner-checked: sets the remaining lease to `ttl` where shortening is the safe side (minHold at release). */
  shorten(keys: LockKeys, token: string, ttl: number): Promise<boolean>;

  /** Leaves the queue, and frees (passing on to the next live waiter) the lock if it is ours. Owner-checked, safe any time. */
  abandon(keys: LockKeys, token: string): Promise<void>;

  /** `abandon`, fire-and-forget: a failure only means the place or lease lapse by themselves. */
  abandonQuietly(keys: LockKeys, token: string): void;

  /** Whether anyone holds the lock now (a snapshot). */
  isLocked(keys: LockKeys): Promise<boolean>;

  /**
   * The health check's round trip (one, bounded like every other call): it exercises what a lock call
   * needs (Redis: a write), so a store that would refuse lock calls fails it. Never rejects: a failure
   * is the outcome's `error`.
   */
  probe(): Promise<StoreProbe>;

  /** Owner-checked renewals, each settling on its own: true (renewed), false (not ours any more) or an Error. */
  renewMany(requests: readonly RenewRequest[]): Promise<Array<boolean | Error>>;
}
