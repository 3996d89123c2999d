import type { Handover, HandoverChannel, HandoverChannelState } from '../../core/handover-channel';
import type { WakeChannel } from '../wake-channel';
import { monotonicNow } from '../../time/clock';
import { quorumOf } from './quorum';
import { majorityHandover, NodeHandover } from './redlock-handovers';

/** What the channel asks the store about one waiter's handover messages (RedlockStore). */
export interface NodeHandovers {
  /** Dates node `node`'s message to the waiter `token` on `lockName`, heard at `heardAt` (monotonic ms); undefined: not counted. */
  datedHandover(token: string, lockName: string, node: number, handover: Handover, heardAt: number): NodeHandover | undefined;
  /** A majority of the nodes handed the lock to `token`: its acquisition is over. */
  handedOver(token: string, lockName: string): void;
}

/**
 * How long a waiter that heard some nodes hand it the lock waits for the rest of a majority before it
 * asks the nodes itself. A release tells every node at once, so the others' messages normally follow
 * within a millisecond; one that does not come (a node slow, down, or handing to another waiter) costs
 * this much, and the attempt then decides as it always could.
 */
const MAJORITY_GRACE_MS = 25;

/**
 * The service's wake channel on every node at once. A waiter registers on all of them. A majority of
 * nodes handing the lock to it with one token is a grant (redlock-handovers.ts): the waiter enters
 * without another round trip. Anything else only wakes it, and its next attempt decides: a majority
 * that does not agree on the token, or no majority of messages it can date within a short grace.
 * `subscribed` once a majority of the subscriptions is confirmed: a lock needs a majority, so those
 * nodes' messages are enough to hear every handover that can make us the holder.
 */
export class RedlockWakeChannel implements HandoverChannel {
  private readonly quorum: number;
  private readonly graceMs: number;
  private closed = false;

  constructor(
    private readonly channels: readonly WakeChannel[],
    private readonly handovers: NodeHandovers,
    nodeTimeout: number,
  ) {
    this.quorum = quorumOf(channels.length);
    this.graceMs = Math.min(MAJORITY_GRACE_MS, nodeTimeout);
  }

  get subscribed(): boolean {
    return !this.closed && this.channels.filter((c) => c.subscribed).length >= this.quorum;
  }

  /** One channel per service on every node (plain pub/sub): the same answer for every lock. */
  subscribedTo(): boolean {
    return this.subscribed;
  }

  get state(): HandoverChannelState {
    if (this.closed) return 'closed';
    const states = this.channels.map((c) => c.state);
    if (states.every((s) => s === 'idle')) return 'idle';
    if (states.filter((s) => s === 'subscribed').length >= this.quorum) return 'subscribed';
    return states.includes('refused') ? 'refused' : 'disconnected';
  }

  register(token: string, lockName: string, wake: (handover?: Handover) => void): () => void {
    const heard = new Map<number, { handover: Handover; heardAt: number }>();
    let grace: NodeJS.Timeout | undefined;
    const stopGrace = () => {
      clearTimeout(grace);
      grace = undefined;
    };
    const hear = (node: number, handover?: Handover) => {
      if (!handover) {
        // The channel asks for an attempt now (a handover may have gone unheard).
        stopGrace();
        wake();
        return;
      }
      const now = monotonicNow();
      heard.set(node, { handover, heardAt: now });
      // Dated each time: the answer that dates a message can come after it (another connection), and
      // an attempt since an earlier message may have shown that one stale.
      const counted = [...heard].flatMap(([n, h]) => this.handovers.datedHandover(token, lockName, n, h.handover, h.heardAt) ?? []);
      const decided = majorityHandover(counted, this.quorum, now);
      if (decided === undefined) {
        grace ??= setTimeout(() => {
          grace = undefined;
          wake();
        }, this.graceMs).unref();
        return;
      }
      stopGrace();
      heard.clear();
      if (decided === 'ask') return wake();
      this.handovers.handedOver(token, lockName);
      wake(decided);
    };
    const unregister = this.channels.map((c, node) => c.register(token, lockName, (handover) => hear(node, handover)));
    this.subscribeLagging(lockName);
    return () => {
      stopGrace();
      unregister.forEach((u) => u());
    };
  }

  /**
   * Waiters ask for a subscription only while the majority is missing (ensureSubscribed), so a node whose
   * subscription failed while the others confirmed (slow or down at the service's first wait) stayed without
   * the service's channel for good: its handovers unheard, each handover needing every other node's message.
   * Each wait asks such a node again, in the background. A channel runs one subscription at a time (and backs
   * off after an ACL refusal), so a node that stays down costs one pending attempt, not one per wait.
   */
  private subscribeLagging(lockName: string): void {
    if (this.closed || !this.subscribed) return; // without a majority, the waiters ask every node themselves
    for (const channel of this.channels) if (!channel.subscribed) void channel.ensureSubscribed(lockName);
  }

  /** Subscribes on every node; resolves as soon as a majority confirmed (a dead node does not hold waiters up), or all settled. */
  ensureSubscribed(lockName: string): Promise<boolean> {
    if (this.subscribed || this.closed) return Promise.resolve(this.subscribed);
    return new Promise((resolve) => {
      let pending = this.channels.length;
      for (const channel of this.channels) {
        void channel.ensureSubscribed(lockName).then(() => {
          pending--;
          if (this.subscribed || pending === 0) resolve(this.subscribed);
        });
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.channels.map((c) => c.close()));
  }
}
