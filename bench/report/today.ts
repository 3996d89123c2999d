/**
 * "No worse than today" references of issue 16: figures of the code before the changes
 * (commit a1db220), from two full `npm run bench` runs on this machine — the
 * bench/results.md committed at a1db220 (2026-11-30) and a run of 2026-12-01 02:27 UTC. Each is the worse of the two:
 * both are today's code, and the machine moves these figures by more than their gap (event-loop
 * delay p99 9 vs 23 ms), so a result inside the range today's code produced is no regression.
 */
export const TODAY = {
  /** (c) 16 workers, one key, 20 ms section. */
  contended20: { waitP99Ms: 369, handoffP50Ms: 0.82 },
  /** (d) 10,000 held locks with renewal. */
  held: { cpuUsPerRenewal: 5.9, eventLoopDelayP99Ms: 23 },
} as const;
