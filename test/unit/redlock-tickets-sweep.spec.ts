/**
 * RedlockTickets sweeps forgotten tickets (acquisitions whose caller vanished) once the map passes
 * SWEEP_ABOVE entries. With that many acquisitions really waiting (a burst of 10,000 waiters, as the
 * dead-waiters suite queues), a sweep removes nothing, and it ran again at every new acquisition's
 * first attempt, on any key: a walk over every ticket per uncontended acquire while the burst lasted.
 */
import { RedlockTickets } from '../../lib/redis/redlock/redlock-tickets';

describe('RedlockTickets: the sweep of forgotten tickets', () => {
  it('runs again only after the map has grown well past what the last sweep left, not at every new ticket', () => {
    const tickets = new RedlockTickets(3_000);
    const sweep = jest.spyOn(tickets as unknown as { sweep(): void }, 'sweep');
    // 12,000 acquisitions waiting at once, none forgotten (all recent).
    for (let i = 0; i < 12_000; i++) tickets.of(`token-${i}`, 'lock', false);
    // The first sweep at 10,000 finds nothing to remove; the 2,000 new tickets after it must not sweep each.
    expect(sweep.mock.calls.length).toBeGreaterThanOrEqual(1);
    expect(sweep.mock.calls.length).toBeLessThanOrEqual(2);
    // Every live ticket is kept, and each acquisition still finds its own.
    expect((tickets as unknown as { tickets: Map<string, unknown> }).tickets.size).toBe(12_000);
    expect(tickets.of('token-0', 'lock', true)).toBe(tickets.of('token-0', 'lock', true));
  });

  it('still removes tickets idle past their bound once the map is large', () => {
    let now = 0;
    jest.spyOn(performance, 'now').mockImplementation(() => now);
    try {
      const tickets = new RedlockTickets(3_000);
      for (let i = 0; i < 10_000; i++) tickets.of(`old-${i}`, 'lock', false);
      now += 11 * 60_000; // past TICKET_MIN_IDLE_MS (10 min): their callers vanished
      for (let i = 0; i < 10; i++) tickets.of(`new-${i}`, 'lock', false);
      expect((tickets as unknown as { tickets: Map<string, unknown> }).tickets.size).toBe(10);
    } finally {
      jest.restoreAllMocks();
    }
  });
});
