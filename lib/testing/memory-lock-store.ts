import { monotonicNow } from '../time/clock';
import type { AcquireReply, LockKeys, LockStore, ReleaseOutcome, RenewRequest } from '../core/lock-store';
import type { StoreProbe } from '../core/store-probe';
import type { MemoryKeyState } from './memory-key-state';
import { memoryLockName, type MemoryLockSpace } from './memory-lock-space';
import { assertWithinRecoveryDelay } from '../options/redlock-options';

/** Free, but promised to a live waiter ahead (the busy reply's holder ttl, as on Redis). */
const PROMISED_TO_WAITER_AHEAD = -1;

/**
 * The LockStore of the testing module: each method does in one synchronous step what the Redis
 * store's Lua script of the same name does in one atomic call (lib/redis/scripts), with the same
 * replies, so the engine above it behaves exactly as on Redis. Locks are named by key prefix and key (memoryLockName).
 */
export class MemoryLockStore implements LockStore {
  constructor(
    private readonly space: MemoryLockSpace,
    private readonly keyPrefix: string,
    private readonly waiterLease: number,
    /** Standing in for Redlock (`nodes` given): its nodeRecoveryDelay, the longest lease production takes (0: none). */
    private readonly leaseLimit = 0,
  ) {}

  /** As RedlockStore: a ttl or minHold production would refuse fails the test too. */
  assertLeaseOptions(options: { readonly ttl: number; readonly minHold: number }): void {
    assertWithinRecoveryDelay('ttl', options.ttl, this.leaseLimit);
    assertWithinRecoveryDelay('minHold', options.minHold, this.leaseLimit);
  }

  keysFor(key: string): LockKeys {
    const name = memoryLockName(this.keyPrefix, key);
    return { key, lock: name, fence: name };
  }

  /** ACQUIRE_SCRIPT (which finds its own token the same way on a retry and on a first attempt: `_retry` is not needed). */
  acquire(keys: LockKeys, token: string, ttl: number, joinQueue: boolean, _retry: boolean): Promise<AcquireReply> {
    const now = monotonicNow();
    const state = this.space.stateOf(keys.lock, now);
    const lastFence = state.lastFence;
    let head: string | undefined = state.queue[0];
    // The lock is ours now: leave the queue if we were its head, hand out the next fencing token.
    const tookIt = (): Promise<AcquireReply> => {
      state.holder = { token, expiresAt: now + ttl };
      if (head !== undefined) {
        state.queue.shift();
        state.places.delete(token);
      }
      return Promise.resolve({ acquired: true, fence: this.space.nextFence(state, now), validFor: ttl });
    };
    // Nobody queued before us: take it if it is free.
    if ((head === undefined || head === token) && !state.holder) return tookIt();
    if (state.holder?.token === token) {
      // Ours already: handed to us by a release whose message we have not read yet (a retry), or taken by this same
      // call's earlier run whose reply was lost (a first attempt sent again). This attempt takes it with a full lease,
      // as a free lock, as ACQUIRE_SCRIPT does (the handed lease may be nearly over: a message read late). It kept what
      // was left of the handed lease, and lapsed where Redis still held the lock (memory-store-parity.spec.ts).
      state.holder.expiresAt = now + ttl;
      return Promise.resolve({ acquired: true, fence: lastFence, validFor: ttl });
    }
    let holderTtl = PROMISED_TO_WAITER_AHEAD;
    if (state.holder) {
      holderTtl = Math.ceil(state.holder.expiresAt - now);
    } else {
      // Free, but promised to a waiter ahead of us: unless its place lapsed.
      head = dropStaleHeads(state, token, now);
      if (head === undefined || head === token) return tookIt();
    }
    if (!joinQueue) return Promise.resolve({ acquired: false, holderTtl, position: -1, lastFence });
    if (!state.places.has(token)) state.queue.push(token);
    state.places.set(token, now + this.waiterLease);
    state.queueUntil = now + this.waiterLease * 2;
    // Places of waiters that stopped refreshing while the lock stayed busy (drop_lapsed_places).
    if (dropLapsedPlaces(state, now)) head = state.queue[0];
    return Promise.resolve({ acquired: false, holderTtl, position: head === undefined || head === token ? 0 : 1, lastFence });
  }

  /** RENEW_SCRIPT: no replicas to wait for. */
  confirmHandover(keys: LockKeys, token: string, ttl: number): Promise<boolean> {
    return Promise.resolve(this.renew(keys, token, ttl));
  }

  /** RELEASE_SCRIPT. */
  release(keys: LockKeys, token: string): Promise<ReleaseOutcome> {
    const now = monotonicNow();
    const state = this.space.stateOf(keys.lock, now);
    if (state.holder?.token !== token) return Promise.resolve('not-owner');
    if (this.space.grantNextWaiter(keys.lock, state, now) === 'granted') return Promise.resolve('handed-over');
    state.holder = undefined;
    return Promise.resolve('freed');
  }

  extend(keys: LockKeys, token: string, ttl: number): Promise<boolean> {
    assertWithinRecoveryDelay('extend ttl', ttl, this.leaseLimit);
    return Promise.resolve(this.renew(keys, token, ttl));
  }

  shorten(keys: LockKeys, token: string, ttl: number): Promise<boolean> {
    assertWithinRecoveryDelay('minHold', ttl, this.leaseLimit);
    return Promise.resolve(this.renew(keys, token, ttl));
  }

  /** ABANDON_SCRIPT: leave the queue; a lock that is ours, or free, goes to the next live waiter. */
  abandon(keys: LockKeys, token: string): Promise<void> {
    const now = monotonicNow();
    const state = this.space.stateOf(keys.lock, now);
    state.leaveQueue(token);
    const holder = state.holder?.token;
    if (holder !== undefined && holder !== token) return Promise.resolve();
    const outcome = this.space.grantNextWaiter(keys.lock, state, now);
    if (holder !== undefined && outcome !== 'granted') state.holder = undefined;
    return Promise.resolve();
  }

  abandonQuietly(keys: LockKeys, token: string): void {
    void this.abandon(keys, token);
  }

  /** Nothing to reach: the round trip of an in-process store is nil, and it never refuses a write. */
  probe(): Promise<StoreProbe> {
    return Promise.resolve({ ms: 0 });
  }

  isLocked(keys: LockKeys): Promise<boolean> {
    return Promise.resolve(this.space.stateOf(keys.lock, monotonicNow()).holder !== undefined);
  }

  renewMany(requests: readonly RenewRequest[]): Promise<Array<boolean | Error>> {
    return Promise.resolve(requests.map((r) => this.renew(r.keys, r.token, r.ttl)));
  }

  /** RENEW_SCRIPT: owner-checked; sets the remaining lease to `ttl`. */
  private renew(keys: LockKeys, token: string, ttl: number): boolean {
    const now = monotonicNow();
    const holder = this.space.stateOf(keys.lock, now).holder;
    if (holder?.token !== token) return false;
    holder.expiresAt = now + ttl;
    return true;
  }
}

/**
 * drop_lapsed_places (lua-functions.ts): a busy attempt, its own place just refreshed, drops the places that
 * lapsed anywhere in the queue (on Redis at most 16 per attempt, here all: as with dropStaleHeads, this store
 * leaves out the per-call bounds); returns whether it dropped any.
 */
function dropLapsedPlaces(state: MemoryKeyState, now: number): boolean {
  const before = state.queue.length;
  state.queue = state.queue.filter((token) => {
    if (state.placeUntil(token) > now) return true;
    state.places.delete(token);
    return false;
  });
  return state.queue.length < before;
}

/** drop_stale_heads: drops queue heads whose place lapsed, stopping at `keep`; returns the new head. */
function dropStaleHeads(state: MemoryKeyState, keep: string, now: number): string | undefined {
  let head = state.queue[0];
  while (head !== undefined && head !== keep && state.placeUntil(head) <= now) {
    state.queue.shift();
    state.places.delete(head);
    head = state.queue[0];
  }
  return head;
}
