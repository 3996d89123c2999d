import { monotonicNow, wallClockMicros } from '../../time/clock';

/** An acquisition that did not end cleanly (its caller vanished) loses its ticket after this long. */
const TICKET_MAX_AGE_MS = 10 * 60_000;
/** Sweep forgotten tickets when the map grows past this. */
const SWEEP_ABOVE = 10_000;

/**
 * What one node last confirmed of a waiting acquisition's place: the send time (monotonic ms) of the
 * attempt that set it, and the key's last fencing token on that node when the attempt ran.
 */
export interface PlaceOnNode {
  sentAt: number;
  lastFence: number;
}

interface Ticket {
  ticket: string;
  at: number;
  /** By node index; unset until that node answered an attempt of this acquisition with a place. */
  places: Array<PlaceOnNode | undefined>;
}

/**
 * The ticket each acquisition of one key picks once, at its first attempt: wall-clock µs when it
 * started waiting. Every attempt carries it to every node, so every node orders the waiters the same
 * way (see ticket-queue.lua.ts). Clocks of different clients only skew *who is first*, never safety:
 * two clients never share a head on one node, and every node agrees on the same order.
 *
 * Beside the ticket: each node's last confirmed place (PlaceOnNode), which dates that node's handover
 * messages (redlock-handovers.ts).
 */
export class RedlockTickets {
  private readonly tickets = new Map<string, Ticket>();
  private lastMicros = 0;

  /** The ticket of `token`'s acquisition of `lock`; a first attempt (`retry` false) picks a fresh one. */
  of(token: string, lock: string, retry: boolean): string {
    const id = `${token} ${lock}`;
    const known = this.tickets.get(id);
    if (known && retry) return known.ticket;
    if (this.tickets.size >= SWEEP_ABOVE) this.sweep();
    const ticket = String(this.nextMicros());
    this.tickets.set(id, { ticket, at: monotonicNow(), places: [] });
    return ticket;
  }

  /**
   * Node `node` answered an attempt sent at `sentAt` with a place for `token` (queued, or granted and
   * given back). A late answer never replaces a later attempt's: its lower last token would make a
   * handover the later attempt saw already look new.
   */
  placed(token: string, lock: string, node: number, place: PlaceOnNode): void {
    const known = this.tickets.get(`${token} ${lock}`);
    const current = known?.places[node];
    if (known && (!current || current.sentAt <= place.sentAt)) known.places[node] = place;
  }

  /** The last place node `node` confirmed for this acquisition, if it is still waiting. */
  placeOn(token: string, lock: string, node: number): PlaceOnNode | undefined {
    return this.tickets.get(`${token} ${lock}`)?.places[node];
  }

  forget(token: string, lock: string): void {
    this.tickets.delete(`${token} ${lock}`);
  }

  /** Strictly increasing within this process: two acquisitions of one client never tie. */
  private nextMicros(): number {
    this.lastMicros = Math.max(wallClockMicros(), this.lastMicros + 1);
    return this.lastMicros;
  }

  private sweep(): void {
    const oldest = monotonicNow() - TICKET_MAX_AGE_MS;
    for (const [id, { at }] of this.tickets) if (at < oldest) this.tickets.delete(id);
  }
}
