import type { Redis } from 'ioredis';
import type { RedisClient } from './redis-connection';

/**
 * Coalesces the commands a burst sends in one turn of the event loop into one socket write.
 *
 * When many locks are taken and released at once, their replies arrive together and each reply's
 * continuation sends the next command: one `write` system call per command, which measured here as
 * the largest client cost of a lock operation. While other calls are in flight, the first command
 * of a turn corks the socket and the end of the turn (`process.nextTick`) uncorks it, so the whole
 * burst leaves in one `writev`. An isolated call (nothing in flight) is written at once, as before:
 * no added latency where there is nothing to batch. Cluster clients are left alone (one socket per node).
 */
export class WriteBatcher {
  private corked = false;

  constructor(private readonly client: RedisClient) {}

  /** Call right before sending a command; `othersInFlight` says whether a burst is under way. */
  beforeSend(othersInFlight: boolean): void {
    if (!othersInFlight || this.corked) return;
    const stream = (this.client as Redis).stream as (NodeJS.WritableStream & { cork?: () => void; uncork?: () => void }) | undefined;
    if (!stream?.cork || !stream.uncork || (this.client as { isCluster?: boolean }).isCluster) return;
    stream.cork();
    this.corked = true;
    process.nextTick(() => {
      this.corked = false;
      stream.uncork!();
    });
  }
}
