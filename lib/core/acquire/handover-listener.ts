import type { Handover, HandoverChannel } from '../handover-channel';

/** Hears the handover of one key (`lockName`) to `token` (a message on the service's wake channel), from construction to `stop()`. */
export class HandoverListener {
  handover?: Handover;
  /** Ends the current pause early. */
  wake?: () => void;
  private readonly unregister: () => void;

  constructor(channel: HandoverChannel, token: string, lockName: string) {
    this.unregister = channel.register(token, lockName, (handover) => {
      if (handover) this.handover = handover;
      this.wake?.();
    });
  }

  stop(): void {
    this.unregister();
  }
}
