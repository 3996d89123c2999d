import { LockBusyError } from '../../errors/lock-busy.error';
import type { ResolvedLockOptions } from '../../options/resolve-options';
import type { LockKeys } from '../lock-store';
import { monotonicNow } from '../../time/clock';
import type { Lease } from '../lease';
import { unlessAborted } from './abortable-call';
import { AcquireContext, AcquireTally, abandonQuietly, shuttingDown } from './acquire-context';
import { HandoverListener } from './handover-listener';
import { grantedLease } from './lease-grant';
import { waitForTurn } from './wait-for-turn';

export type { AcquireContext, AcquireTally } from './acquire-context';

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
  keys: LockKeys,
  token: string,
  options: ResolvedLockOptions,
  waitUntil: number,
  tally: AcquireTally,
): Promise<Lease> {
  if (ctx.shutdown.aborted) return Promise.reject(shuttingDown(keys));
  tally.attempts++;
  const waits = options.onBusy === 'retry';
  // A release hands the lock to the head of the queue and says so on another connection, which can
  // be read before the reply of the attempt that queued us, so the listener must be registered
  // before that attempt is sent. Until the service's subscription is confirmed no message can reach
  // us, and an attempt sent before then is followed by an immediate retry that finds a lock handed
  // to us (see waitForTurn): so a service that never waited registers nothing on its acquires.
  const subscribedAtSend = ctx.wakeChannel.subscribedTo(keys.lock);
  const listener = waits && subscribedAtSend ? new HandoverListener(ctx.wakeChannel, token, keys.lock) : undefined;
  const sentAt = monotonicNow();
  // The caller's signal ends the attempt on the wire too (Redis frozen or slow): the error path below takes it back.
  return unlessAborted(ctx, keys, token, options.signal, ctx.store.acquire(keys, token, options.ttl, waits, false)).then(
    (reply) => {
      if (reply.acquired) {
        listener?.stop();
        return grantedLease(ctx, keys, token, options.ttl, reply, sentAt);
      }
      if (!waits) {
        listener?.stop();
        throw new LockBusyError(keys.key, reply.holderTtl);
      }
      tally.waited = true;
      const turn = { tally, listener: listener ?? new HandoverListener(ctx.wakeChannel, token, keys.lock), reply, sentAt, subscribedAtSend };
      return waitForTurn(ctx, keys, token, options, waitUntil, turn);
    },
    (error: unknown) => {
      listener?.stop();
      // The attempt may have reached Redis even though we saw no answer (or the caller gave up before it came): take
      // back anything it did.
      abandonQuietly(ctx, keys, token);
      throw error;
    },
  );
}
