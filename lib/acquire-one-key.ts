import { DistributedLockError } from './errors/distributed-lock.error';
import { LockBusyError } from './errors/lock-busy.error';
import { LockConnectionError } from './errors/lock-connection.error';
import { LockTimeoutError } from './errors/lock-timeout.error';
import { monotonicNow } from './internal/clock';
import { interruptibleDelay } from './internal/sleep';
import { Lease, newLease } from './lease';
import type { ResolvedLockOptions } from './options/resolve-options';
import type { LockRedisKeys } from './redis/lock-redis-keys';
import type { RedisLockStore } from './redis/redis-lock-store';
import type { Handover, WakeChannel } from './redis/wake-channel';

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
 */
export async function acquireOneKey(
  ctx: AcquireContext,
  keys: LockRedisKeys,
  token: string,
  options: ResolvedLockOptions,
  waitUntil: number,
): Promise<Lease> {
  const waits = options.onBusy === 'retry';
  const started = monotonicNow();
  let attempts = 0;
  let wake: (() => void) | undefined;
  // A release hands the lock to the head of the queue and says so on another connection, which can
  // be read before the reply of the attempt that queued us, so the listener must be registered before
  // that attempt is sent, and a handover that arrives while an attempt is on the wire is kept for the
  // next step. Until the service's subscription is confirmed no message can reach us, and an attempt
  // sent before then is followed by an immediate retry that finds a lock handed to us (see below):
  // so a service that never waited registers nothing on its (uncontended) acquires.
  let handover: Handover | undefined;
  // Sent before the release that handed us the lock ran (it answered "busy"): a safe start for that lease.
  let lastBusySentAt = started;
  let unregister: (() => void) | undefined;
  const listen = () => {
    unregister ??= ctx.wakeChannel.register(token, (h) => {
      handover = h;
      wake?.();
    });
  };
  let queued = false;
  try {
    for (;;) {
      if (handover) {
        queued = false;
        return validLease(ctx, keys, token, newLease(keys, handover.fence, options.ttl, lastBusySentAt, handover.validFor), lastBusySentAt);
      }
      if (ctx.shutdown.aborted) throw new DistributedLockError(`LockService is shutting down; lock "${keys.key}" was not acquired.`);
      attempts++;
      const subscribedAtSend = ctx.wakeChannel.subscribed;
      if (waits && subscribedAtSend) listen();
      const sentAt = monotonicNow();
      let reply;
      try {
        reply = await ctx.store.acquire(keys, token, options.ttl, waits, attempts > 1);
      } catch (error) {
        // The attempt may have reached Redis even though we saw no answer: take back anything it did.
        abandonQuietly(ctx, keys, token);
        queued = false;
        throw error;
      }
      if (reply.acquired) {
        queued = false;
        if (!(reply.fence > 0)) {
          // Only possible when Redis evicted the fencing counter under a lock it kept (an eviction policy other than noeviction).
          abandonQuietly(ctx, keys, token);
          throw new LockConnectionError(`Redis holds "${keys.key}" for us but lost its fencing counter (evicted? use maxmemory-policy noeviction); the lock was given back.`, 'acquire');
        }
        return validLease(ctx, keys, token, newLease(keys, reply.fence, options.ttl, sentAt, reply.validFor), sentAt);
      }
      lastBusySentAt = sentAt;
      queued = reply.position >= 0;
      if (!waits) throw new LockBusyError(keys.key, reply.holderTtl);
      listen();
      if (handover) continue;
      const remaining = waitUntil - monotonicNow();
      if (remaining <= 0) throw new LockTimeoutError(keys.key, monotonicNow() - started, attempts);
      // The service subscribes once, at its first wait (uncontended acquires stay one round trip).
      // If that happened only after our attempt was sent, a release in between went unheard: retry now.
      if (!subscribedAtSend && (await ctx.wakeChannel.ensureSubscribed())) continue;
      if (handover) continue;
      const delay = nextDelay(reply.holderTtl, reply.position, attempts, ctx.wakeChannel.subscribed, options, ctx.waiterLease);
      const pause = interruptibleDelay(Math.min(delay, remaining), ctx.shutdown);
      wake = pause.wake;
      await pause.promise;
      wake = undefined;
    }
  } catch (error) {
    if (queued) abandonQuietly(ctx, keys, token);
    throw error;
  } finally {
    unregister?.();
  }
}

/** A lease whose validity already ran out (Redis answered too late) counts as failed and is given back. */
function validLease(ctx: AcquireContext, keys: LockRedisKeys, token: string, lease: Lease, since: number): Lease {
  if (monotonicNow() < lease.deadline) return lease;
  abandonQuietly(ctx, keys, token);
  throw new LockConnectionError(
    `Redis answered the acquire of "${keys.key}" after ${Math.round(monotonicNow() - since)} ms, beyond its ${lease.ttl} ms lease; the lock was given back.`,
    'acquire',
  );
}

function nextDelay(
  holderTtl: number,
  position: number,
  attempts: number,
  subscribed: boolean,
  options: ResolvedLockOptions,
  waiterLease: number,
): number {
  // Refresh our place in the queue well before it is considered abandoned.
  const refresh = Math.floor(waiterLease / 3) * (0.8 + Math.random() * 0.2);
  // The head wakes when the holder's lease would end, in case the holder died without releasing.
  const untilHolderExpiry = position === 0 && holderTtl > 0 ? holderTtl + 1 : Infinity;
  if (subscribed) return Math.min(refresh, untilHolderExpiry);
  const backoff = Math.min(options.retryDelay.max, options.retryDelay.min * 2 ** Math.min(attempts, 20));
  return Math.min(refresh, untilHolderExpiry, Math.max(1, Math.random() * backoff));
}

/** Fire-and-forget, owner-checked clean-up; failures only mean the queue entry or lease lapse by themselves. */
function abandonQuietly(ctx: AcquireContext, keys: LockRedisKeys, token: string): void {
  ctx.store.abandon(keys, token).catch(() => undefined);
}
