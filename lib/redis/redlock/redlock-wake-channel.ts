import type { Handover, HandoverChannel, HandoverChannelState } from '../../core/handover-channel';
import type { WakeChannel } from '../wake-channel';
import { quorumOf } from './quorum';

/**
 * The service's wake channel on every node at once. A waiter registers on all of them; any node's
 * handover wakes it (in this mode a handover only ends the pause: see LockBackend.handoverIsWakeUp).
 * `subscribed` once a majority of the subscriptions is confirmed: a lock needs a majority, so those
 * nodes' messages are enough to hear every handover that can make us the holder.
 */
export class RedlockWakeChannel implements HandoverChannel {
  private readonly quorum: number;
  private closed = false;

  constructor(private readonly channels: readonly WakeChannel[]) {
    this.quorum = quorumOf(channels.length);
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
    return states.filter((s) => s === 'subscribed').length >= this.quorum ? 'subscribed' : 'disconnected';
  }

  register(token: string, lockName: string, wake: (handover?: Handover) => void): () => void {
    const unregister = this.channels.map((c) => c.register(token, lockName, wake));
    return () => unregister.forEach((u) => u());
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
