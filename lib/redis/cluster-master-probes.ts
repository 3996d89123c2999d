import type { Cluster } from 'ioredis';
import { keySlot } from './key-slot';

/** How often, while clean-ups are kept, a Cluster's masters are tried again: our own connections' longest reconnect delay. */
export const PROBE_EVERY_MS = 500;

/** The clean-ups kept for a reconnect, as the probes see them (GiveBacksAfterReconnect). */
export interface KeptCleanUps {
  /** Each kept clean-up's id and the lock it frees. */
  locks(): Iterable<[id: string, lock: string]>;
  /** Sends the kept clean-up `id` once more; resolves whether it landed (a failure keeps it again). */
  sendOne(id: string): Promise<boolean>;
  /** Sends once more every kept clean-up whose lock `which` accepts. */
  sendAgain(which: (lock: string) => boolean): void;
}

/**
 * When kept clean-ups go again on a Cluster client, where no event says that the connection one needs is back. A
 * Cluster client's own `ready` comes only when it connects as a whole (after every master was lost). Its connection
 * to one master is a Redis of its connection pool that does not reconnect by default (`clusterNodeRetryStrategy`
 * unset): once it drops, it ends and leaves the pool (`-node`), and ioredis opens a new one (`+node`, then its
 * `ready`) only for a command routed to that master's slots, or at a slot refresh, which opens nothing until such a
 * command comes. So after an outage with no lock traffic to that master, nothing would ever send the clean-ups.
 *
 * While some are kept, every PROBE_EVERY_MS one clean-up per master (by the client's slot table) is sent: routed to
 * that master, it is what makes ioredis connect it again. One that lands says the master is back, and the others for
 * it follow at once. At most one probe per master is in flight, so a master that stays down costs one command (bounded
 * by commandTimeout) at a time, however many clean-ups wait for it.
 */
export class ClusterMasterProbes {
  private timer?: NodeJS.Timeout;
  /** Masters with a probe in flight. */
  private readonly probing = new Set<string>();

  constructor(
    private readonly cluster: Cluster,
    private readonly kept: KeptCleanUps,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.probe(), PROBE_EVERY_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private probe(): void {
    const firstFor = new Map<string, string>();
    for (const [id, lock] of this.kept.locks()) {
      const master = this.masterOf(lock);
      if (!this.probing.has(master) && !firstFor.has(master)) firstFor.set(master, id);
    }
    for (const [master, id] of firstFor) {
      this.probing.add(master);
      void this.kept.sendOne(id).then((landed) => {
        this.probing.delete(master);
        if (landed) this.kept.sendAgain((lock) => this.masterOf(lock) === master);
      });
    }
  }

  /** The master the client's slot table routes `lock` to ('' while its slot is not covered). */
  private masterOf(lock: string): string {
    return this.cluster.slots?.[keySlot(lock)]?.[0] ?? '';
  }
}
