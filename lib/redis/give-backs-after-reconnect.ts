import { acquisitionId, ttlOfOwnerToken } from '../core/owner-token';
import { LockConnectionError } from '../errors/lock-connection.error';
import { monotonicNow } from '../time/clock';
import type { LockRedisKeys } from './lock-redis-keys';
import { isClusterClient, type RedisClient } from './redis-connection';
import { ClusterMasterProbes, type KeptCleanUps } from './cluster-master-probes';

/**
 * Most clean-ups kept for a reconnect. Each is a few hundred bytes; a longer outage with more failed acquisitions
 * leaves the rest to lapse by themselves, as all of them did before this existed.
 */
export const MAX_GIVE_BACKS_KEPT = 10_000;

/** When kept clean-ups go again: started when one is kept, stopped when none is left (or at close). */
interface ReconnectWatch {
  start(): void;
  stop(): void;
}

/** One connection (a single Redis, Sentinel's primary, a Redlock node): its next `ready`. */
class ReadyWatch implements ReconnectWatch {
  private listening = false;

  constructor(
    private readonly client: RedisClient,
    private readonly onReady: () => void,
  ) {}

  start(): void {
    if (this.listening) return;
    this.listening = true;
    this.client.on('ready', this.onReady);
  }

  stop(): void {
    if (!this.listening) return;
    this.listening = false;
    this.client.off('ready', this.onReady);
  }
}

interface Kept {
  keys: LockRedisKeys;
  token: string;
  /** Until when (monotonic ms) the clean-up is still worth sending. */
  until: number;
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
 * A Cluster client repeats no `ready` when one master's connection comes back, and does not even reconnect it by
 * itself: there the clean-ups are tried again per master (cluster-master-probes.ts). Either way it watches only while
 * some are kept: a client of the user's otherwise carries no listener or timer of ours.
 */
export class GiveBacksAfterReconnect implements KeptCleanUps {
  /** By token and key. */
  private readonly pending = new Map<string, Kept>();
  private readonly watch: ReconnectWatch;
  private closed = false;

  constructor(
    client: RedisClient,
    private readonly abandon: (keys: LockRedisKeys, token: string) => Promise<void>,
  ) {
    this.watch = isClusterClient(client) ? new ClusterMasterProbes(client, this) : new ReadyWatch(client, () => this.sendAgain());
  }

  /**
   * The abandon of `token` on `keys` failed with `error`: kept for the reconnect when the connection failed it, until
   * the lease it may have left would have lapsed (`until`: that moment, when known from an earlier failure).
   */
  failed(keys: LockRedisKeys, token: string, error: unknown, until = monotonicNow() + ttlOfOwnerToken(token)): void {
    const now = monotonicNow();
    // After close(): a clean-up still in flight at shutdown fails with the connection; nothing is sent any more.
    if (this.closed || !(error instanceof LockConnectionError) || until <= now) return;
    // Kept only until the next `ready`: on a connection that never drops (calls that timed out on a slow Redis), the
    // ones whose lease is over make room.
    if (this.pending.size >= MAX_GIVE_BACKS_KEPT) for (const [id, kept] of this.pending) if (kept.until <= now) this.pending.delete(id);
    if (this.pending.size >= MAX_GIVE_BACKS_KEPT) return;
    this.pending.set(acquisitionId(token, keys.lock), { keys, token, until });
    this.watch.start();
  }

  /**
   * `call`, a release or abandon of `token` on `keys`: one its connection failed is kept for the reconnect (failed),
   * and the failure still reaches the caller.
   */
  keptIfRefused<T>(keys: LockRedisKeys, token: string, call: Promise<T>): Promise<T> {
    return call.catch((error: unknown) => {
      this.failed(keys, token, error);
      throw error;
    });
  }

  /** @internal Tests: how many are kept. */
  get size(): number {
    return this.pending.size;
  }

  *locks(): Iterable<[id: string, lock: string]> {
    for (const [id, kept] of this.pending) yield [id, kept.keys.lock];
  }

  sendOne(id: string): Promise<boolean> {
    const kept = this.take((other) => other === id)[0];
    return kept ? this.send(kept) : Promise.resolve(false);
  }

  /** The connection is back: each clean-up (of those `which` accepts) whose lease may still run is sent once more. */
  sendAgain(which?: (lock: string) => boolean): void {
    for (const kept of this.take(which && ((_, lock) => which(lock)))) void this.send(kept);
  }

  /** The store is closing: nothing more is sent, and a client of the user's keeps no listener or timer of ours. */
  close(): void {
    this.closed = true;
    this.watch.stop();
    this.pending.clear();
  }

  /** Removes the kept clean-ups `which` accepts (all without it) and returns those whose lease may still run. */
  private take(which?: (id: string, lock: string) => boolean): Kept[] {
    const now = monotonicNow();
    const due: Kept[] = [];
    for (const [id, kept] of this.pending) {
      if (which && !which(id, kept.keys.lock)) continue;
      this.pending.delete(id);
      if (kept.until > now) due.push(kept);
    }
    if (this.pending.size === 0) this.watch.stop();
    return due;
  }

  /** Sends `kept` once more; resolves whether it landed (a failure keeps it again). */
  private send({ keys, token, until }: Kept): Promise<boolean> {
    return this.abandon(keys, token).then(
      () => true,
      (error: unknown) => {
        this.failed(keys, token, error, until);
        return false;
      },
    );
  }
}
