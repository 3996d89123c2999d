/** Who holds a lock, and until when (monotonic ms): the lock key of the Redis store, with its expiry. */
export interface MemoryHolder {
  token: string;
  expiresAt: number;
}

/**
 * One lock's state in memory, mirroring its four Redis keys (lib/redis/lock-redis-keys.ts): the
 * holder with its lease, the last fencing token, the FIFO queue of waiting tokens, and each waiter's
 * place deadline. Expiry is applied lazily, on the engine's monotonic clock, by `settle`.
 */
export class MemoryKeyState {
  holder?: MemoryHolder;
  /** Last fencing token handed out (0: none yet). */
  lastFence = 0;
  /** Waiting tokens, first come first. */
  queue: string[] = [];
  /** Waiting token → monotonic ms after which its place is forfeit (it stopped refreshing). */
  readonly places = new Map<string, number>();
  /** The queue and places lapse together, like their Redis keys (refreshed to twice the waiter lease on each join). */
  queueUntil = 0;

  /** Applies every expiry due at `now`: the lease, and a queue nobody refreshed. */
  settle(now: number): this {
    if (this.holder && this.holder.expiresAt <= now) this.holder = undefined;
    if (this.queue.length > 0 && this.queueUntil <= now) this.clearQueue();
    return this;
  }

  /** Until when `token` keeps its place (0 when it has none). */
  placeUntil(token: string): number {
    return this.places.get(token) ?? 0;
  }

  clearQueue(): void {
    this.queue = [];
    this.places.clear();
  }

  /** Takes `token` out of the queue wherever it stands. */
  leaveQueue(token: string): void {
    if (!this.places.delete(token)) return;
    this.queue = this.queue.filter((t) => t !== token);
  }
}
