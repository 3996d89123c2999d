import { monotonicNow, wallClockMicros } from '../../time/clock';
import { acquisitionId } from '../../core/owner-token';

/**
 * An acquisition that made no attempt for this long (its caller vanished) loses its ticket; longer
 * if the waiter lease is (a waiting acquisition asks again every third of it).
 */
const TICKET_MIN_IDLE_MS = 10 * 60_000;
/** Sweep forgotten tickets when the map grows past this. */
const SWEEP_ABOVE = 10_000;
/**
 * Above SWEEP_ABOVE, a sweep runs again only this long after the last one (or once the map has doubled
 * since): with that many acquisitions really waiting (a burst of waiters), a sweep removes nothing, and
 * one at every new acquisition's first attempt, on any key, walked every ticket each time.
 */
const SWEEP_INTERVAL_MS = 60_000;

/**
 * What one node last confirmed of a waiting acquisition's place: the send time (monotonic ms) of the
 * call that set it, and the key's last fencing token on that node when the call ran.
 */
export interface PlaceOnNode {
  sentAt: number;
  lastFence: number;
}

/** What this acquisition knows of one node. */
interface NodeView {
  place?: PlaceOnNode;
  /** Calls sent to the node that can change our hold or place there, not answered yet. */
  asking: number;
  /** The number (RedlockTickets-wide, increasing) of the last such call sent to the node. */
  lastCall: number;
}

interface Ticket {
  ticket: string;
  /** When the acquisition last made an attempt (monotonic ms): a live wait makes one every third of waiterLease. */
  at: number;
  /**
   * A majority of handovers granted the lock since the last attempt: the acquisition is over unless
   * the waiter read them too late and asks again (`of`), keeping its ticket.
   */
  handedOver?: boolean;
  /** By node index. */
  nodes: NodeView[];
}

/**
 * The ticket each acquisition of one key picks once, at its first attempt: wall-clock µs when it
 * started waiting. Every attempt carries it to every node, so every node orders the waiters the same
 * way (see ticket-queue.lua.ts). Clocks of different clients only skew *who is first*, never safety:
 * two clients never share a head on one node, and every node agrees on the same order.
 *
 * Beside the ticket: each node's last confirmed place, which dates that node's handover messages
 * (redlock-handovers.ts), whether a call that can change it is on its way, and which call was sent
 * there last. The entry lives while the acquisition waits or holds a lock it was handed; once it is
 * over (won, released, abandoned) its calls are not tracked any more.
 */
export class RedlockTickets {
  private readonly tickets = new Map<string, Ticket>();
  private lastMicros = 0;
  /** Numbers every tracked call, across acquisitions: a number never repeats, even after a ticket is picked again. */
  private calls = 0;
  private readonly maxIdleMs: number;
  /** When the last sweep ran (monotonic ms) and how many tickets it left: see SWEEP_INTERVAL_MS. */
  private sweptAt = -Infinity;
  private sweptSize = 0;

  constructor(waiterLease = 0) {
    this.maxIdleMs = Math.max(TICKET_MIN_IDLE_MS, 2 * waiterLease);
  }

  /** The ticket of `token`'s acquisition of `lock`; a first attempt (`retry` false) picks a fresh one. */
  of(token: string, lock: string, retry: boolean): string {
    const id = acquisitionId(token, lock);
    const known = this.tickets.get(id);
    if (known && retry) {
      known.at = monotonicNow();
      known.handedOver = false;
      return known.ticket;
    }
    if (this.tickets.size >= SWEEP_ABOVE && this.sweepDue()) this.sweep();
    const ticket = String(this.nextMicros());
    this.tickets.set(id, { ticket, at: monotonicNow(), nodes: [] });
    return ticket;
  }

  forget(token: string, lock: string): void {
    this.tickets.delete(acquisitionId(token, lock));
  }

  /** A majority of handovers granted `token` the lock: see Ticket.handedOver. */
  markHandedOver(token: string, lock: string): void {
    const known = this.tickets.get(acquisitionId(token, lock));
    if (known) known.handedOver = true;
  }

  /**
   * Where this acquisition is, as far as tickets know: still waiting, handed the lock by a majority of handovers
   * (it holds the lock until its release forgets the ticket), or undefined: over, or won by an attempt.
   */
  standOf(token: string, lock: string): 'waiting' | 'handed-over' | undefined {
    const known = this.tickets.get(acquisitionId(token, lock));
    if (!known) return undefined;
    return known.handedOver ? 'handed-over' : 'waiting';
  }

  /**
   * Tracks `call` to node `node` (an attempt, or a give-back keeping the place), sent at `sentAt`:
   * until it answers, that node's handovers cannot be dated (it may run after a handover and undo it:
   * a give-back deletes a lock that is ours). Its answer records the place it left (`placeOf`:
   * undefined when it left none); a failure leaves the place unknown, since the call may have run.
   */
  track<T>(token: string, lock: string, node: number, sentAt: number, call: Promise<T>, placeOf: (reply: T) => number | undefined): Promise<T> {
    const view = this.viewOf(token, lock, node);
    if (!view) return call;
    view.asking++;
    view.lastCall = ++this.calls;
    return call.then(
      (reply) => {
        view.asking--;
        const lastFence = placeOf(reply);
        // A late answer never replaces a later call's: its lower last token would make a handover the
        // later call saw already look new.
        if (lastFence !== undefined && (!view.place || view.place.sentAt <= sentAt)) view.place = { sentAt, lastFence };
        return reply;
      },
      (error: unknown) => {
        view.asking--;
        view.place = undefined;
        throw error;
      },
    );
  }

  /** The last place node `node` confirmed for this acquisition, if it is still waiting and no call to that node is on its way. */
  placeOn(token: string, lock: string, node: number): PlaceOnNode | undefined {
    const view = this.tickets.get(acquisitionId(token, lock))?.nodes[node];
    return view && view.asking === 0 ? view.place : undefined;
  }

  /**
   * The number of the last call tracked to node `node` for this acquisition: undefined once it is over.
   * Read right after `track` to name that call (see `isLastCall`).
   */
  lastCallTo(token: string, lock: string, node: number): number | undefined {
    return this.tickets.get(acquisitionId(token, lock))?.nodes[node]?.lastCall;
  }

  /**
   * Whether call number `call` is still the last one this acquisition sent node `node`, the
   * acquisition still waiting (not handed the lock since). A later call runs after it on that node's
   * connection, so that call's own answer says what to do with the node.
   */
  isLastCall(token: string, lock: string, node: number, call: number | undefined): boolean {
    const known = this.tickets.get(acquisitionId(token, lock));
    return call !== undefined && !known?.handedOver && known?.nodes[node]?.lastCall === call;
  }

  private viewOf(token: string, lock: string, node: number): NodeView | undefined {
    const known = this.tickets.get(acquisitionId(token, lock));
    if (!known) return undefined;
    return (known.nodes[node] ??= { asking: 0, lastCall: 0 });
  }

  /** Strictly increasing within this process: two acquisitions of one client never tie. */
  private nextMicros(): number {
    this.lastMicros = Math.max(wallClockMicros(), this.lastMicros + 1);
    return this.lastMicros;
  }

  private sweepDue(): boolean {
    return this.tickets.size >= 2 * this.sweptSize || monotonicNow() - this.sweptAt >= SWEEP_INTERVAL_MS;
  }

  private sweep(): void {
    const now = monotonicNow();
    const oldest = now - this.maxIdleMs;
    for (const [id, { at }] of this.tickets) if (at < oldest) this.tickets.delete(id);
    this.sweptAt = now;
    this.sweptSize = this.tickets.size;
  }
}
