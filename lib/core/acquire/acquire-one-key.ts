import { LockStateError } from '../../errors/lock-state.error';
import { LockBusyError } from '../../errors/lock-busy.error';
import { LockConnectionError } from '../../errors/lock-connection.error';
import { LockServiceClosedError } from '../../errors/lock-service-closed.error';
import { LockTimeoutError } from '../../errors/lock-timeout.error';
import { monotonicNow } from '../clock';
import { interruptibleDelay } from '../sleep';
import { Lease, newLease } from '../lease';
import type { ResolvedLockOptions } from '../../options/resolve-options';
import type { LockRedisKeys } from '../../redis/lock-redis-keys';
import { isFencingToken } from '../../redis/lock-state';
import type { AcquireReply, RedisLockStore } from '../../redis/redis-lock-store';
import type { Handover, WakeChannel } from '../../redis/wake-channel';

export interface AcquireContext {
  store: RedisLockStore;
  wakeChannel: WakeChannel;
  waiterLease: number;
  /** Aborts when the service shuts down: every waiter stops at once. */
  shutdown: AbortSignal;
}

/**
 * Takes one key, waiting according to the policy. Returns the lease, or throws:
 * `LockBusyError` (busy, no waiting), `LockTimeoutError` (waited `waitTimeout`),
 * `LockConnectionError` (Redis unreachable or too slow, never confused with busy).
 *
 * Waiting is queue-based: a busy 'retry' attempt takes a place in the key's FIFO queue in Redis,
 * and the release hands the lock straight to the longest waiter and tells only that waiter's
 * service, so exactly one waiter wakes per release and it enters without another round trip.
 * Timers are only the safety net: the queue head wakes when the holder's lease would end (holder
 * crashed, or a waiter the lock was handed to died), everyone refreshes their place every
 * third of `waiterLease`, and without a confirmed subscription waiters poll with exponential
 * backoff and full jitter, capped by the holder's remaining lease.
 *
 * The first attempt is a plain promise chain: an uncontended acquire (the common case) costs one
 * script call and no async frame of its own; only a busy key enters the waiting loop.
 */
export function acquireOneKey(
  ctx: AcquireContext,
  keys: LockRedisKeys,
  token: string,
  options: ResolvedLockOptions,
  waitUntil: number,
): Promise<Lease> {
  if (ctx.shutdown.aborted) return Promise.reject(shuttingDown(keys));
  const waits = options.onBusy === 'retry';
  // A release hands the lock to the head of the queue and says so on another connection, which can
  // be read before the reply of the attempt that queued us, so the listener must be registered
  // before that attempt is sent. Until the service's subscription is confirmed no message can reach
  // us, and an attempt sent before then is followed by an immediate retry that finds a lock handed
  // to us (see waitForTurn): so a service that never waited registers nothing on its acquires.
  const subscribedAtSend = ctx.wakeChannel.subscribed;
  const listener = waits && subscribedAtSend ? new HandoverListener(ctx.wakeChannel, token, keys.lock) : undefined;
  const sentAt = monotonicNow();
  return ctx.store.acquire(keys, token, options.ttl, waits, false).then(
    (reply) => {
      if (reply.acquired) {
        listener?.stop();
        return grantedLease(ctx, keys, token, options.ttl, reply, sentAt);
      }
      if (!waits) {
        listener?.stop();
        throw new LockBusyError(keys.key, reply.holderTtl);
      }
      const turn = { listener: listener ?? new HandoverListener(ctx.wakeChannel, token, keys.lock), reply, sentAt, subscribedAtSend };
      return waitForTurn(ctx, keys, token, options, waitUntil, turn);
    },
    (error: unknown) => {
      listener?.stop();
      // The attempt may have reached Redis even though we saw no answer: take back anything it did.
      abandonQuietly(ctx, keys, token);
      throw error;
    },
  );
}

/** Hears the handover of one key (`lockName`) to `token` (a message on the service's wake channel), from construction to `stop()`. */
class HandoverListener {
  handover?: Handover;
  /** Ends the current pause early. */
  wake?: () => void;
  private readonly unregister: () => void;

  constructor(channel: WakeChannel, token: string, lockName: string) {
    this.unregister = channel.register(token, lockName, (handover) => {
      this.handover = handover;
      this.wake?.();
    });
  }

  stop(): void {
    this.unregister();
  }
}

interface FirstBusyAttempt {
  listener: HandoverListener;
  /** The busy reply of the first attempt (it queued us). */
  reply: Extract<AcquireReply, { acquired: false }>;
  sentAt: number;
  subscribedAtSend: boolean;
}

/** After a busy first attempt: waits in the queue, woken by the handover or a safety-net timer, until taken or timed out. */
async function waitForTurn(
  ctx: AcquireContext,
  keys: LockRedisKeys,
  token: string,
  options: ResolvedLockOptions,
  waitUntil: number,
  first: FirstBusyAttempt,
): Promise<Lease> {
  const { listener } = first;
  const started = first.sentAt;
  let { reply, sentAt, subscribedAtSend } = first;
  let attempts = 1;
  // Sent before the release that handed us the lock ran (it answered "busy"): a safe start for that lease.
  let lastBusySentAt = sentAt;
  let queued = reply.position >= 0;
  try {
    for (;;) {
      // `reply` is busy here, and queued us.
      if (!listener.handover) {
        const remaining = waitUntil - monotonicNow();
        if (remaining <= 0) throw new LockTimeoutError(keys.key, monotonicNow() - started, attempts);
        // The service subscribes once, at its first wait (uncontended acquires stay one round trip).
        // If that happened only after our attempt was sent, a release in between went unheard: retry now.
        const retryNow = !subscribedAtSend && (await ctx.wakeChannel.ensureSubscribed());
        if (!retryNow && !listener.handover) {
          const delay = nextDelay(reply.holderTtl, reply.position, attempts, ctx.wakeChannel.subscribed, options, ctx.waiterLease);
          const pause = interruptibleDelay(Math.min(delay, remaining), ctx.shutdown);
          listener.wake = pause.wake;
          await pause.promise;
          listener.wake = undefined;
        }
      }
      const handover = listener.handover;
      if (handover) {
        queued = false;
        assertFence(ctx, keys, token, handover.fence);
        if (ctx.store.replicaAcks) return await confirmedHandover(ctx, keys, token, handover.fence, options.ttl);
        return validLease(ctx, keys, token, newLease(keys, handover.fence, options.ttl, lastBusySentAt, handedOverFor(ctx, handover)), lastBusySentAt);
      }
      if (ctx.shutdown.aborted) throw shuttingDown(keys);
      attempts++;
      subscribedAtSend = ctx.wakeChannel.subscribed;
      sentAt = monotonicNow();
      let next: AcquireReply;
      try {
        next = await ctx.store.acquire(keys, token, options.ttl, true, true);
      } catch (error) {
        // The attempt may have reached Redis even though we saw no answer: take back anything it did.
        abandonQuietly(ctx, keys, token);
        queued = false;
        throw error;
      }
      if (next.acquired) {
        queued = false;
        return grantedLease(ctx, keys, token, options.ttl, next, sentAt);
      }
      reply = next;
      lastBusySentAt = sentAt;
      queued = reply.position >= 0;
    }
  } catch (error) {
    if (queued) abandonQuietly(ctx, keys, token);
    throw error;
  } finally {
    listener.stop();
  }
}

/**
 * With `replicaAcks`: a lock handed over by a release counts only once replicas confirmed it (see
 * RedisLockStore.confirmHandover); the confirming renewal restarts the lease at `ttl`.
 */
async function confirmedHandover(ctx: AcquireContext, keys: LockRedisKeys, token: string, fence: number, ttl: number): Promise<Lease> {
  const sentAt = monotonicNow();
  let ours: boolean;
  try {
    ours = await ctx.store.confirmHandover(keys, token, ttl);
  } catch (error) {
    abandonQuietly(ctx, keys, token);
    throw error;
  }
  if (!ours) {
    throw new LockConnectionError(`Lock "${keys.key}" was handed to us, but had expired before replicas could confirm it; try again.`, 'acquire');
  }
  return validLease(ctx, keys, token, newLease(keys, fence, ttl, sentAt), sentAt);
}

/** The lease an attempt that took the lock was granted; gives the lock back and throws when it cannot be used. */
function grantedLease(
  ctx: AcquireContext,
  keys: LockRedisKeys,
  token: string,
  ttl: number,
  reply: Extract<AcquireReply, { acquired: true }>,
  sentAt: number,
): Lease {
  assertFence(ctx, keys, token, reply.fence);
  return validLease(ctx, keys, token, newLease(keys, reply.fence, ttl, sentAt, reply.validFor), sentAt);
}

/**
 * Every token the client receives (acquire reply, handover message, a retry's read of the last one)
 * must be a positive exact integer; anything else means the key's state is corrupt, and a lock with
 * a token that may not increase is given back rather than used.
 */
function assertFence(ctx: AcquireContext, keys: LockRedisKeys, token: string, fence: number): void {
  if (isFencingToken(fence)) return;
  abandonQuietly(ctx, keys, token);
  throw new LockStateError(
    keys.key,
    keys.fence,
    `Lock "${keys.key}" was granted with fencing token ${String(fence)}, which is not a positive integer below 2^53: Redis key "${keys.fence}" ` +
      `is missing or damaged (an eviction policy other than noeviction, or another writer). The lock was given back, owner-checked.`,
  );
}

/**
 * The lease a handover gave us, counted from our last busy attempt's send time (a moment before the
 * grant). Redis set `validFor` ms at the grant, which came `waiterLease - placeLeft` ms (server
 * clock) after the refresh that set our place; our last busy attempt was sent no later than that
 * refresh ran, so adding that gap counts the lease from the handover, never past Redis' expiry.
 */
function handedOverFor(ctx: AcquireContext, handover: Handover): number {
  return handover.validFor + Math.max(0, ctx.waiterLease - handover.placeLeft);
}

const shuttingDown = (keys: LockRedisKeys) => new LockServiceClosedError(keys.key, 'the wait was ended by close()');

/** A lease whose validity already ran out (Redis answered too late) counts as failed and is given back. */
function validLease(ctx: AcquireContext, keys: LockRedisKeys, token: string, lease: Lease, since: number): Lease {
  if (monotonicNow() < lease.deadline) return lease;
  abandonQuietly(ctx, keys, token);
  throw new LockConnectionError(
    `Redis answered the acquire of "${keys.key}" after ${Math.round(monotonicNow() - since)} ms, beyond its ${lease.ttl} ms lease; the lock was given back.`,
    'acquire',
  );
}

/** Holder pttl in a busy reply: free, but promised to a live waiter ahead of us. */
const PROMISED_TO_WAITER_AHEAD = -1;
/** Holder pttl in a busy reply: free, and the stale waiters ahead of us are not all dropped yet. */
const PURGING_STALE_WAITERS = -3;
/** How often (per waiterLease) a waiter looks at a free lock promised to a waiter ahead of it. */
const PROMISED_POLLS_PER_LEASE = 30;

function nextDelay(
  holderTtl: number,
  position: number,
  attempts: number,
  subscribed: boolean,
  options: ResolvedLockOptions,
  waiterLease: number,
): number {
  // Stale waiters ahead of us are still being dropped from a free lock's queue: ask again at once
  // (each call drops a bounded run, so this ends).
  if (holderTtl === PURGING_STALE_WAITERS) return 0;
  // Refresh our place in the queue well before it is considered abandoned.
  const refresh = Math.floor(waiterLease / 3) * (0.8 + Math.random() * 0.2);
  // Free, but promised to a waiter ahead of us: it takes the lock within moments if it is alive, or
  // its place lapses within waiterLease if it died; look again soon rather than a refresh later.
  if (holderTtl === PROMISED_TO_WAITER_AHEAD) return Math.min(refresh, Math.max(1, Math.floor(waiterLease / PROMISED_POLLS_PER_LEASE)));
  // Wake when the holder's lease would end, in case the holder (or a waiter it was handed to) died.
  const untilHolderExpiry = holderTtl > 0 ? holderTtl + 1 : Infinity;
  if (subscribed) return Math.min(refresh, untilHolderExpiry);
  const backoff = Math.min(options.retryDelay.max, options.retryDelay.min * 2 ** Math.min(attempts, 20));
  return Math.min(refresh, untilHolderExpiry, Math.max(1, Math.random() * backoff));
}

/** Fire-and-forget, owner-checked clean-up; failures only mean the queue entry or lease lapse by themselves. */
function abandonQuietly(ctx: AcquireContext, keys: LockRedisKeys, token: string): void {
  ctx.store.abandon(keys, token).catch(() => undefined);
}
