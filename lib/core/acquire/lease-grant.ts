import { LockConnectionError } from '../../errors/lock-connection.error';
import { LockStateError } from '../../errors/lock-state.error';
import { isFencingToken } from '../fencing-token';
import { Handover, handedOverFor } from '../handover-channel';
import type { AcquireReply, LockKeys } from '../lock-store';
import { monotonicNow } from '../../time/clock';
import { Lease, newLease } from '../lease';
import { unlessAborted } from './abortable-call';
import { AcquireContext, abandonQuietly } from './acquire-context';

/**
 * A lock handed over by a release, renewed to `ttl` before it is used: with `replicaAcks` it counts only once
 * replicas confirmed it (see LockStore.confirmHandover); with the watchdog off, nothing else would give it more
 * than the waiter's lease it was handed with (3 s by default, against the ttl asked for), so it is extended once.
 * Undefined when the key is not ours any more (the handed lease ended first, or a failover lost it): like a
 * handover read late, the wait goes on and the caller's next attempt decides. The caller's `signal` ends it on the
 * wire, the lock given back.
 */
export async function confirmedHandover(
  ctx: AcquireContext,
  keys: LockKeys,
  token: string,
  fence: number,
  ttl: number,
  signal: AbortSignal | undefined,
): Promise<Lease | undefined> {
  const sentAt = monotonicNow();
  let ours: boolean;
  try {
    // Owner-checked only, never with the fencing token: a Redlock renewal carrying it takes the key back on nodes where it
    // is free, which is safe for a lease known to be alive, not for a handed lease that may have ended (and been taken
    // and released by another client) before this call arrives.
    const confirm = ctx.confirmsHandovers ? ctx.store.confirmHandover(keys, token, ttl) : ctx.store.extend(keys, token, ttl);
    ours = await unlessAborted(ctx, keys, token, signal, confirm);
  } catch (error) {
    abandonQuietly(ctx, keys, token);
    throw error;
  }
  if (!ours) return undefined;
  return validLease(ctx, keys, token, newLease(keys, fence, ttl, sentAt), sentAt);
}

/** The lease an attempt that took the lock was granted; gives the lock back and throws when it cannot be used. */
export function grantedLease(
  ctx: AcquireContext,
  keys: LockKeys,
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
export function assertFence(ctx: AcquireContext, keys: LockKeys, token: string, fence: number): void {
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
 * The lease a handover gave us: counted from our last busy attempt's send time (it set our place; see
 * handedOverFor), or, for a handover the channel has dated (Redlock), from the moment it gives.
 * Undefined when it has already ended: the message was read late (a blocked event loop, a slow
 * subscriber connection). Nothing failed and the wait is not over; the caller's next attempt says
 * whether the key is ours (the retry path finds a handed lock still ours and grants a fresh lease).
 */
export function handedOverLease(handover: Handover, ttl: number, lastBusySentAt: number, waiterLease: number, keys: LockKeys): Lease | undefined {
  const since = handover.since ?? lastBusySentAt;
  const validFor = handover.since === undefined ? handedOverFor(handover, waiterLease) : handover.validFor;
  const lease = newLease(keys, handover.fence, ttl, since, validFor);
  return monotonicNow() < lease.deadline ? lease : undefined;
}

/** A lease whose validity already ran out (Redis answered too late) counts as failed and is given back. */
export function validLease(ctx: AcquireContext, keys: LockKeys, token: string, lease: Lease, since: number): Lease {
  if (monotonicNow() < lease.deadline) return lease;
  abandonQuietly(ctx, keys, token);
  throw new LockConnectionError(
    `Redis answered the acquire of "${keys.key}" after ${Math.round(monotonicNow() - since)} ms, beyond its ${lease.ttl} ms lease; the lock was given back.`,
    'acquire',
  );
}
