/**
 * A release handed one key of the lock to this waiter: its fencing token, the lease (ms) the store set,
 * and how much of the waiter's place in the queue was left (ms) when it did. The waiter counts that
 * lease from the send time of the last call that set its place (see handedOverFor).
 */
export interface StoreHandover {
  fence: number;
  validFor: number;
  placeLeft: number;
  since?: undefined;
}

/**
 * How long a handover's lease lasts counted from the send time of the call that last set the waiter's
 * place (a moment before the grant). The store set `validFor` ms at the grant, which came
 * `waiterLease - placeLeft` ms (server clock) after the refresh that set the place; that call was sent
 * no later than the refresh ran, so adding that gap counts the lease from the handover, never past the
 * store's expiry. The one rule for a single store's handover and each Redlock node's.
 */
export function handedOverFor(handover: StoreHandover, waiterLease: number): number {
  return handover.validFor + Math.max(0, waiterLease - handover.placeLeft);
}

/**
 * A handover the channel has already dated: `validFor` ms counted from `since` (monotonic ms, a moment
 * no later than the grant). Redlock: a majority of nodes handed the lock over with one token, and the
 * shortest of their leases counts (redlock-handovers.ts).
 */
export interface DatedHandover {
  fence: number;
  validFor: number;
  since: number;
  placeLeft?: undefined;
}

export type Handover = StoreHandover | DatedHandover;

/** Whether handovers reach this service now (health checks): not yet asked for, flowing, interrupted, refused by the server's ACL, or closed. */
export type HandoverChannelState = 'idle' | 'subscribed' | 'disconnected' | 'refused' | 'closed';

/**
 * Where one LockService hears that a release handed it a lock (Redis: its pub/sub channel,
 * lib/redis/wake-channel.ts; tests: lib/testing). Exactly one service hears about each handover.
 */
export interface HandoverChannel {
  /** True once handovers reach registered waiters (of some key); until then waiters poll. */
  readonly subscribed: boolean;

  /**
   * Whether a handover of `lockName` reaches a waiter registered now (read before each attempt, so
   * it must be cheap). One channel per service: `subscribed`. Redis Cluster with sharded pub/sub:
   * the channel of the lock's slot, subscribed on the master that owns it now.
   */
  subscribedTo(lockName: string): boolean;

  /** For health checks; read locally, sends nothing. */
  readonly state: HandoverChannelState;

  /**
   * Registers `wake` for the handover of `lockName` (LockKeys.lock) to `token`, synchronously, before
   * the attempt that may queue it is sent; returns the unregister function. `wake()` without a
   * handover asks the waiter to try again now: a handover may have gone unheard (the channel of
   * its slot was lost and is back).
   */
  register(token: string, lockName: string, wake: (handover?: Handover) => void): () => void;

  /**
   * Makes sure handovers of `lockName` reach this service: subscribes once per service (sharded: per
   * slot, again after the slot moved); true when confirmed, false when it failed (waiters then poll)
   * or the channel closed.
   */
  ensureSubscribed(lockName: string): Promise<boolean>;

  close(): Promise<void>;
}
