import { LockConnectionError } from '../errors/lock-connection.error';
import { monotonicNow } from '../time/clock';
import type { LockRedisKeys } from './lock-redis-keys';
import type { RedisClient } from './redis-connection';

/**
 * Most clean-ups kept for a reconnect. Each is a few hundred bytes; a longer outage with more failed acquisitions
 * leaves the rest to lapse by themselves, as all of them did before this existed.
 */
export const MAX_GIVE_BACKS_KEPT = 10_000;

/** How long an owner token's lock or queue place can outlive the call that took it (ms): the ttl the token carries. */
function leaseBoundOf(token: string): number {
  const ttl = Number(token.split('.', 2)[1]);
  return Number.isSafeInteger(ttl) && ttl > 0 ? ttl : 0;
}

/**
 * Owner-checked clean-ups (abandons) that failed on the connection, sent again once it is back. An acquire whose
 * reply was lost with its connection (a reset, a proxy or load balancer dropping it, Redis' `timeout`) may have
 * taken the key: the caller was told `LockConnectionError` ("nothing ran under it") and its clean-up was refused
 * while the connection was down, so the key stayed held for its whole ttl by a token nobody uses, and every other
 * service was told "busy". Sent again at the next `ready`, while the lease it may have taken could still run. Safe at
 * any time: a token is never used again once its acquisition failed, and the abandon touches only that token's lock
 * and queue place. One per connection: a Redlock store keeps one per node.
 *
 * It listens to `ready` only while some are kept: a client of the user's otherwise carries no listener of ours.
 */
export class GiveBacksAfterReconnect {
  /** By token and key: until when (monotonic ms) a clean-up is still worth sending. */
  private readonly pending = new Map<string, { keys: LockRedisKeys; token: string; until: number }>();
  private readonly onReady = () => this.sendAgain();
  private listening = false;
  private closed = false;

  constructor(
    private readonly client: RedisClient,
    private readonly abandon: (keys: LockRedisKeys, token: string) => Promise<void>,
  ) {}

  /**
   * The abandon of `token` on `keys` failed with `error`: kept for the reconnect when the connection failed it, until
   * the lease it may have left would have lapsed (`until`: that moment, when known from an earlier failure).
   */
  failed(keys: LockRedisKeys, token: string, error: unknown, until = monotonicNow() + leaseBoundOf(token)): void {
    const now = monotonicNow();
    // After close(): a clean-up still in flight at shutdown fails with the connection; nothing is sent any more.
    if (this.closed || !(error instanceof LockConnectionError) || until <= now) return;
    // Kept only until the next `ready`: on a connection that never drops (calls that timed out on a slow Redis), the
    // ones whose lease is over make room.
    if (this.pending.size >= MAX_GIVE_BACKS_KEPT) for (const [id, kept] of this.pending) if (kept.until <= now) this.pending.delete(id);
    if (this.pending.size >= MAX_GIVE_BACKS_KEPT) return;
    this.pending.set(`${token} ${keys.lock}`, { keys, token, until });
    this.listen(true);
  }

  /** @internal Tests: how many are kept. */
  get size(): number {
    return this.pending.size;
  }

  /** The connection is back: each clean-up whose lease may still run is sent once more (a failure keeps it again). */
  private sendAgain(): void {
    if (this.pending.size === 0) return;
    const now = monotonicNow();
    const due = [...this.pending.values()];
    this.pending.clear();
    this.listen(false);
    for (const { keys, token, until } of due) {
      if (until <= now) continue;
      this.abandon(keys, token).catch((error: unknown) => this.failed(keys, token, error, until));
    }
  }

  /** The store is closing: nothing more is sent, and a client of the user's keeps no listener of ours. */
  close(): void {
    this.closed = true;
    this.listen(false);
    this.pending.clear();
  }

  private listen(on: boolean): void {
    if (on === this.listening) return;
    this.listening = on;
    if (on) this.client.on('ready', this.onReady);
    else this.client.off('ready', this.onReady);
  }
}
