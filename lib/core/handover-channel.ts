/**
 * A release handed one key of the lock to this waiter: its fencing token, the lease (ms) the store set,
 * and how much of the waiter's place in the queue was left (ms) when it did.
 */
export interface Handover {
  fence: number;
  validFor: number;
  placeLeft: number;
}

/** Whether handovers reach this service now (health checks): not yet asked for, flowing, interrupted, or closed. */
export type HandoverChannelState = 'idle' | 'subscribed' | 'disconnected' | 'closed';

/**
 * Where one LockService hears that a release handed it a lock (Redis: its pub/sub channel,
 * lib/redis/wake-channel.ts; tests: lib/testing). Exactly one service hears about each handover.
 */
export interface HandoverChannel {
  /** True once handovers reach registered waiters; until then waiters poll. */
  readonly subscribed: boolean;

  /** For health checks; read locally, sends nothing. */
  readonly state: HandoverChannelState;

  /**
   * Registers `wake` for the handover of `lockName` (LockKeys.lock) to `token`, synchronously, before
   * the attempt that may queue it is sent; returns the unregister function.
   */
  register(token: string, lockName: string, wake: (handover: Handover) => void): () => void;

  /** Subscribes once per service; true when confirmed, false when it failed (waiters then poll) or the channel closed. */
  ensureSubscribed(): Promise<boolean>;

  close(): Promise<void>;
}
