/**
 * Smallest ttl accepted, in ms. A lease is counted valid for ttl − driftFor(ttl) (2 ms + 1 % of ttl,
 * core/lease.ts) from the moment the request was sent, minus the round trip: at 1 or 2 ms nothing is
 * left before the reply even arrives, so every acquire failed and was reported as Redis answering
 * too late. A held lock also needs its renewals: the watchdog sends one at ttl/3 and must hear back
 * before ttl − drift, a window of 0 ms at ttl 3, 4 ms at 9 and 5 ms at 10. 10 ms is the first ttl
 * whose window holds a loopback round trip (0.1–1 ms) plus Node's 1 ms timer granularity plus a
 * few ms of event-loop delay, and whose drift allowance is no more than a fifth of the lease.
 */
export const MIN_TTL_MS = 10;

/** Largest value Node's timers accept (and the TTL ceiling of the contract). */
export const MAX_TIMER_MS = 2_147_483_647;

/** Longest `name` (metric lock.name): far above any template, low enough that a resolved key passed by mistake (up to 1 KiB) is caught. */
export const MAX_LOCK_NAME_LENGTH = 200;
