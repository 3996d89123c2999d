import { LockTimeoutError } from '../../errors/lock-timeout.error';
import type { ResolvedLockOptions } from '../../options/resolve-options';
import type { AcquireReply, LockKeys } from '../lock-store';
import { monotonicNow } from '../../time/clock';
import type { Lease } from '../lease';
import { interruptibleDelay } from '../../time/sleep';
import { abortable, unlessAborted } from './abortable-call';
import { AcquireContext, AcquireTally, abandonQuietly, abortReason, shuttingDown } from './acquire-context';
import type { HandoverListener } from './handover-listener';
import { assertFence, confirmedHandover, grantedLease, handedOverLease } from './lease-grant';

export interface FirstBusyAttempt {
  /** Counts this wait's attempts too. */
  tally: AcquireTally;
  listener: HandoverListener;
  /** The busy reply of the first attempt (it queued us). */
  reply: Extract<AcquireReply, { acquired: false }>;
  sentAt: number;
  subscribedAtSend: boolean;
}

/** After a busy first attempt: waits in the queue, woken by the handover or a safety-net timer, until taken or timed out. */
export async function waitForTurn(
  ctx: AcquireContext,
  keys: LockKeys,
  token: string,
  options: ResolvedLockOptions,
  waitUntil: number,
  first: FirstBusyAttempt,
): Promise<Lease> {
  const { listener } = first;
  const started = first.sentAt;
  let { reply, sentAt, subscribedAtSend } = first;
  let attempts = 1;
  // The last busy attempt: when it was sent, and the key's last fencing token when it ran. If that
  // token is below a handover's, the attempt ran before the grant and its send time is a safe start
  // for the handed-over lease; if not, it ran after the grant and found the lock not ours, so the
  // handover is stale (its lease ran out while we were not looking: a blocked event loop, a slow
  // subscriber connection) and must not be believed.
  let lastBusySentAt = sentAt;
  let lastBusyFence = reply.lastFence;
  let queued = reply.position >= 0;
  try {
    for (;;) {
      // `reply` is busy here, and queued us.
      let retryNow = dropStaleHandover(listener, lastBusyFence);
      if (!listener.handover && !retryNow) {
        const remaining = waitUntil - monotonicNow();
        if (remaining <= 0) throw new LockTimeoutError(keys.key, monotonicNow() - started, attempts, ctx.heldInProcess(keys));
        // The service subscribes once, at its first wait (uncontended acquires stay one round trip).
        // If that happened only after our attempt was sent, a release in between went unheard: retry now.
        // The caller's signal ends that call too; the subscription is the service's, kept whatever became of this wait.
        retryNow = !subscribedAtSend && (await subscribed(ctx, keys, options.signal));
        if (!retryNow && !listener.handover) {
          const delay = nextDelay(reply.holderTtl, reply.position, attempts, ctx.wakeChannel.subscribedTo(keys.lock), options, ctx.waiterLease);
          const pause = interruptibleDelay(Math.min(delay, remaining), ctx.shutdown, options.signal);
          listener.wake = pause.wake;
          await pause.promise;
          listener.wake = undefined;
        }
      }
      // A message heard during the pause is dated against the same last busy attempt: a busy answer
      // read before the message can still come from an attempt that ran after its grant.
      dropStaleHandover(listener, lastBusyFence);
      const handover = listener.handover;
      if (handover) {
        assertFence(ctx, keys, token, handover.fence);
        // The handover took our place; a confirmation that fails gives the key back itself.
        queued = false;
        const lease =
          ctx.confirmsHandovers || !options.watchdog
            ? await confirmedHandover(ctx, keys, token, handover.fence, options.ttl, options.signal)
            : handedOverLease(handover, options.ttl, lastBusySentAt, ctx.waiterLease, keys);
        if (lease) return lease;
        // Read after its lease ended, or not ours when confirmed: ask now (below). Until that answer,
        // a failure leaves owner-checked.
        listener.handover = undefined;
        queued = true;
      }
      if (ctx.shutdown.aborted) throw shuttingDown(keys);
      // The caller gave up (LockOptions.signal): leave the queue (below) rather than ask again.
      if (options.signal?.aborted) throw abortReason(options.signal);
      attempts++;
      first.tally.attempts++;
      subscribedAtSend = ctx.wakeChannel.subscribedTo(keys.lock);
      sentAt = monotonicNow();
      let next: AcquireReply;
      try {
        next = await unlessAborted(ctx, keys, token, options.signal, ctx.store.acquire(keys, token, options.ttl, true, true));
      } catch (error) {
        // The attempt may have reached Redis even though we saw no answer (or the caller gave up before it came): take
        // back anything it did.
        abandonQuietly(ctx, keys, token);
        queued = false;
        throw error;
      }
      if (next.acquired) {
        queued = false;
        const lease = grantedLease(ctx, keys, token, options.ttl, next, sentAt);
        // An attempt that found the lock handed to us gets what is left of the handed lease (Redlock, the memory store;
        // a single Redis gives the full ttl). With the watchdog off nothing renews it: extend it once, as a handover
        // message's. Not ours any more (it lapsed meanwhile): ask again.
        if (options.watchdog || next.validFor >= options.ttl) return lease;
        const extended = await confirmedHandover(ctx, keys, token, next.fence, options.ttl, options.signal);
        if (extended) return extended;
        reply = { acquired: false, holderTtl: PROMISED_TO_WAITER_AHEAD, position: 0, lastFence: next.fence };
        lastBusySentAt = sentAt;
        lastBusyFence = next.fence;
        queued = true;
        continue;
      }
      reply = next;
      lastBusySentAt = sentAt;
      lastBusyFence = next.lastFence;
      queued = reply.position >= 0;
    }
  } catch (error) {
    if (queued) abandonQuietly(ctx, keys, token);
    throw error;
  } finally {
    listener.stop();
  }
}

/** Whether handovers of `keys` reach this service now (subscribing at the first wait), or the caller's abort. */
function subscribed(ctx: AcquireContext, keys: LockKeys, signal: AbortSignal | undefined): Promise<boolean> {
  const subscribing = ctx.wakeChannel.ensureSubscribed(keys.lock);
  return signal ? abortable(subscribing, signal) : subscribing;
}

/**
 * Forgets a handover that our last busy attempt saw granted already (its last fencing token is at or
 * above the handover's): that attempt ran after the grant and found the lock not ours, so the handed
 * lease ran out unseen. Nothing is believed on that message; our next attempt says whether the key is
 * ours. Returns whether one was dropped.
 */
export function dropStaleHandover(listener: Pick<HandoverListener, 'handover'>, lastBusyFence: number): boolean {
  // A handover the channel dated (Redlock) was checked node by node already; lastBusyFence is the
  // highest over every node, and a node that did not count may be ahead of the others.
  if (!listener.handover || listener.handover.since !== undefined || lastBusyFence < listener.handover.fence) return false;
  listener.handover = undefined;
  return true;
}

/** Holder pttl in a busy reply: free, but promised to a live waiter ahead of us. */
const PROMISED_TO_WAITER_AHEAD = -1;
/** Holder pttl in a busy reply: free, and the stale waiters ahead of us are not all dropped yet. */
const PURGING_STALE_WAITERS = -3;
/** holderTtl of a busy reply: no owner holds a majority of the nodes (Redlock); settles within moments. */
const NO_MAJORITY = -4;
/** How often (per waiterLease) a waiter looks at a free lock promised to a waiter ahead of it. */
const PROMISED_POLLS_PER_LEASE = 30;
/** Waiters refresh their place this many times per waiterLease, so one missed refresh does not forfeit it. */
const REFRESHES_PER_LEASE = 3;
/** Refresh timers run at 80–100 % of their interval: waiters queued together do not refresh together. */
const REFRESH_JITTER = 0.2;
/** The polling backoff stops doubling after this many attempts (retryDelay.max caps it long before). */
const MAX_BACKOFF_DOUBLINGS = 20;

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
  const refresh = Math.floor(waiterLease / REFRESHES_PER_LEASE) * (1 - REFRESH_JITTER + Math.random() * REFRESH_JITTER);
  // Free, but promised to a waiter ahead of us: it takes the lock within moments if it is alive, or
  // its place lapses within waiterLease if it died; look again soon rather than a refresh later.
  // No majority for anyone yet (Redlock): the same, the vote settles within moments.
  if (holderTtl === PROMISED_TO_WAITER_AHEAD || holderTtl === NO_MAJORITY) {
    return Math.min(refresh, Math.max(1, Math.floor(waiterLease / PROMISED_POLLS_PER_LEASE)));
  }
  // Wake when the holder's lease would end, in case the holder (or a waiter it was handed to) died.
  const untilHolderExpiry = holderTtl > 0 ? holderTtl + 1 : Infinity;
  if (subscribed) return Math.min(refresh, untilHolderExpiry);
  const backoff = Math.min(options.retryDelay.max, options.retryDelay.min * 2 ** Math.min(attempts, MAX_BACKOFF_DOUBLINGS));
  return Math.min(refresh, untilHolderExpiry, Math.max(1, Math.random() * backoff));
}
