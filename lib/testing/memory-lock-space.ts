import { performance } from 'node:perf_hooks';
import { MemoryKeyState } from './memory-key-state';
import { MemoryWakeChannel } from './memory-wake-channel';

/** A queued token is `<service id>.<ttl>.<random>` (lib/core/owner-token.ts): who to tell, and the lease it asked for. */
const WAITER_TOKEN = /^([^.]+)\.(\d+)\./;

let spaces = 0;

/**
 * The name of lock `key` under `keyPrefix`: services with different prefixes have separate locks, as on Redis
 * (`prefix{key}`, lock-redis-keys.ts). A prefix has no `{` (resolveKeyPrefix), so the first `{` ends it and no two
 * (prefix, key) pairs share a name.
 */
export const memoryLockName = (keyPrefix: string, key: string): string => `${keyPrefix}{${key}`;

/**
 * The in-memory "server" every LockService of one testing module shares: each lock's state and each
 * service's wake channel. Its two rules are the Lua prelude's (lib/redis/scripts/lua-functions.ts):
 * who gets a released lock next (`grantNextWaiter`) and what a fencing token is (`nextFence`).
 *
 * No timers: on Redis too, nothing happens when a lease or a place lapses; the next call sees it.
 * Here every call applies the lapses due at its moment (MemoryKeyState.settle), on the engine's
 * monotonic clock, and the engine's own timers wake its waiters as they do on Redis.
 */
export class MemoryLockSpace {
  /** Names this space in messages (LockBackend.location): services on one space share locks, as on one Redis. */
  readonly location = `the in-memory locks #${++spaces} of a testing module`;
  private readonly states = new Map<string, MemoryKeyState>();
  private readonly channels = new Map<string, MemoryWakeChannel>();

  /** The state of lock `name` as of `now` (expiries applied). */
  stateOf(name: string, now: number): MemoryKeyState {
    let state = this.states.get(name);
    if (!state) this.states.set(name, (state = new MemoryKeyState()));
    return state.settle(now);
  }

  /** The wake channel of service `serviceId`, until it is closed. */
  subscribe(serviceId: string): MemoryWakeChannel {
    const channel = new MemoryWakeChannel(() => {
      if (this.channels.get(serviceId) === channel) this.channels.delete(serviceId);
    });
    this.channels.set(serviceId, channel);
    return channel;
  }

  /**
   * grant_next_waiter: hands lock `name` (free, or being given up by its holder) to the first waiter
   * whose place is still live, dropping the stale ones before it, and tells that waiter's service:
   * the lock never sits free between holders. The lease runs until the waiter's place would have
   * lapsed (at most its ttl), so a waiter that died since its last refresh blocks the key no longer
   * than it blocked the queue. Redis drops at most 256 stale entries per call and lets the caller
   * continue (PASS_ON_SCRIPT); here the whole run is dropped at once, with the same outcome.
   */
  grantNextWaiter(name: string, state: MemoryKeyState, now: number): 'granted' | 'empty' {
    while (state.queue.length > 0) {
      const waiter = state.queue.shift()!;
      const placeUntil = state.placeUntil(waiter);
      state.places.delete(waiter);
      const parsed = WAITER_TOKEN.exec(waiter);
      if (!parsed || placeUntil <= now) continue;
      const placeLeft = placeUntil - now;
      const lease = Math.min(Number(parsed[2]), placeLeft);
      state.holder = { token: waiter, expiresAt: now + lease };
      const fence = this.nextFence(state, now);
      // Whole ms as Redis sends them, rounded to the waiter's safe side: a lease no longer than the
      // one set, a place left no shorter (the waiter counts its lease from its last refresh plus the gap).
      this.channels.get(parsed[1])?.deliver(waiter, name, { fence, validFor: Math.floor(lease), placeLeft: Math.ceil(placeLeft) });
      return 'granted';
    }
    return 'empty';
  }

  /**
   * next_fence: the clock in microseconds, or the last token + 1 when that is not above it, so
   * tokens of a key strictly increase and look like the ones Redis hands out.
   */
  nextFence(state: MemoryKeyState, now: number): number {
    const clock = Math.floor((performance.timeOrigin + now) * 1000);
    state.lastFence = clock > state.lastFence ? clock : state.lastFence + 1;
    return state.lastFence;
  }
}
