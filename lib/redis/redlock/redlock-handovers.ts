import { DatedHandover, handedOverFor, StoreHandover } from '../../core/handover-channel';
import { leaseEnd } from '../../core/lease';
import type { PlaceOnNode } from './redlock-tickets';

/**
 * One node's handover of the lock to a waiter, dated: the node's lock is the waiter's from a moment
 * after `since` (monotonic ms) until no earlier than `until`, with fencing token `fence`.
 */
export interface NodeHandover {
  fence: number;
  since: number;
  until: number;
}

/**
 * Dates one node's handover message by the place that node last confirmed for this wait. The node's
 * release ran after that attempt (the attempt saw a lower token than the handover's), so it used the
 * place that attempt set or a later one, so its lease is counted from the attempt's send time by the
 * single-node rule (handedOverFor).
 * Undefined when it cannot be counted: that node confirmed no place in this wait; or its last answer
 * came after the grant (it saw this token already, so the lock was not ours then: a stale message); or
 * that place was set by a call sent after the message was heard (`heardAt`, monotonic ms), so after
 * the grant: an attempt that ran then and left a place found the lock not ours, and a give-back
 * deletes it. (A node restarted empty would otherwise answer that call with a lower last token and
 * make a message from before the restart look new.)
 */
export function datedNodeHandover(
  place: PlaceOnNode | undefined,
  handover: StoreHandover,
  waiterLease: number,
  heardAt: number,
): NodeHandover | undefined {
  if (!place || handover.fence <= place.lastFence || place.sentAt >= heardAt) return undefined;
  return { fence: handover.fence, since: place.sentAt, until: place.sentAt + handedOverFor(handover, waiterLease) };
}

/**
 * What the handovers heard so far decide. A majority of nodes that handed the lock over with the
 * highest token any of them issued is the lock, as a majority of grants is: those nodes hold the
 * waiter's token and keep that fencing token as their last one, so every later majority issues a
 * higher one (the write-back the acquire path does is not needed). Its lease is the shortest. A
 * majority heard without such agreement: 'ask' (the next attempt decides and writes the token back).
 * Fewer than a majority: undefined (wait for the others). A handover whose lease, less the drift
 * allowance, has ended by `now` (monotonic ms; heard in an earlier round of this wait) is not counted,
 * and a majority whose combined lease (from the earliest place to the shortest end, with the drift
 * allowance of that longer span, as the waiter will count it) has ended is 'ask' too.
 */
export function majorityHandover(all: readonly NodeHandover[], quorum: number, now: number): DatedHandover | 'ask' | undefined {
  const heard = all.filter((h) => leaseEnd(h.since, h.until - h.since) > now);
  if (heard.length < quorum) return undefined;
  const fence = Math.max(...heard.map((h) => h.fence));
  const agreeing = heard.filter((h) => h.fence === fence);
  if (agreeing.length < quorum) return 'ask';
  const since = Math.min(...agreeing.map((h) => h.since));
  const validFor = Math.min(...agreeing.map((h) => h.until)) - since;
  if (leaseEnd(since, validFor) <= now) return 'ask';
  return { fence, since, validFor };
}
