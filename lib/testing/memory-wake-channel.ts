import type { Handover, HandoverChannel, HandoverChannelState } from '../core/handover-channel';
import { acquisitionId } from '../core/owner-token';

/**
 * The in-memory counterpart of a service's Redis pub/sub channel: the space delivers a handover to
 * the service named in the waiter's token, and only to it. Subscribed from the start (nothing to
 * confirm), so waiters are woken by handovers, never by polling.
 */
export class MemoryWakeChannel implements HandoverChannel {
  private readonly waiters = new Map<string, (handover: Handover) => void>();
  private closed = false;

  constructor(private readonly onClose: () => void) {}

  get subscribed(): boolean {
    return !this.closed;
  }

  subscribedTo(): boolean {
    return !this.closed;
  }

  get state(): HandoverChannelState {
    return this.closed ? 'closed' : 'subscribed';
  }

  register(token: string, lockName: string, wake: (handover: Handover) => void): () => void {
    const id = acquisitionId(token, lockName);
    this.waiters.set(id, wake);
    return () => this.waiters.delete(id);
  }

  ensureSubscribed(): Promise<boolean> {
    return Promise.resolve(!this.closed);
  }

  /** A release handed `lockName` to `token`; a message nobody waits for is dropped, as on Redis. */
  deliver(token: string, lockName: string, handover: Handover): void {
    this.waiters.get(acquisitionId(token, lockName))?.(handover);
  }

  close(): Promise<void> {
    this.closed = true;
    this.waiters.clear();
    this.onClose();
    return Promise.resolve();
  }
}
