import { monotonicNow, wallClockMicros } from '../../time/clock';

/** An acquisition that did not end cleanly (its caller vanished) loses its ticket after this long. */
const TICKET_MAX_AGE_MS = 10 * 60_000;
/** Sweep forgotten tickets when the map grows past this. */
const SWEEP_ABOVE = 10_000;

/**
 * The ticket each acquisition of one key picks once, at its first attempt: wall-clock µs when it
 * started waiting. Every attempt carries it to every node, so every node orders the waiters the same
 * way (see ticket-queue.lua.ts). Clocks of different clients only skew *who is first*, never safety:
 * two clients never share a head on one node, and every node agrees on the same order.
 */
export class RedlockTickets {
  private readonly tickets = new Map<string, { ticket: string; at: number }>();
  private lastMicros = 0;

  /** The ticket of `token`'s acquisition of `lock`; a first attempt (`retry` false) picks a fresh one. */
  of(token: string, lock: string, retry: boolean): string {
    const id = `${token} ${lock}`;
    const known = this.tickets.get(id);
    if (known && retry) return known.ticket;
    if (this.tickets.size >= SWEEP_ABOVE) this.sweep();
    const ticket = String(this.nextMicros());
    this.tickets.set(id, { ticket, at: monotonicNow() });
    return ticket;
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
