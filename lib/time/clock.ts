/**
 * Monotonic milliseconds. Lease deadlines are computed on this clock only: wall-clock time
 * (`Date.now()`) jumps with NTP and manual changes and would make leases look longer or shorter.
 * The global `performance` (not `node:perf_hooks`' binding): Jest's fake timers replace the global, so
 * tests on the testing module can move leases with `jest.advanceTimersByTimeAsync`.
 */
export const monotonicNow = (): number => performance.now();

/**
 * Wall-clock microseconds (`performance.timeOrigin + now`): only for values other processes compare
 * loosely (Redlock tickets and fencing-token proposals), never for a lease.
 */
export const wallClockMicros = (): number => Math.floor((performance.timeOrigin + performance.now()) * 1000);
