import { performance } from 'node:perf_hooks';

/**
 * Monotonic milliseconds. Lease deadlines are computed on this clock only: wall-clock time
 * (`Date.now()`) jumps with NTP and manual changes and would make leases look longer or shorter.
 */
export const monotonicNow = (): number => performance.now();
