/** Sizes of every workload; BENCH_QUICK=1 gives a ~1 minute smoke run with the same code paths. */
export interface BenchConfig {
  quick: boolean;
  sequential: { rounds: number; cyclesPerRound: number };
  parallel: { rounds: number; opsPerRound: number; inFlight: number };
  contended: { workers: number; runs: Array<{ sectionMs: number; durationMs: number }> };
  held: { locks: number; ttl: number; holdMs: number };
}

const FULL: BenchConfig = {
  quick: false,
  // Rounds are interleaved across libraries, each on a fresh server; the median round is reported,
  // because one shared 2-core machine is noisy at the 100 µs scale.
  sequential: { rounds: 5, cyclesPerRound: 1_000 },
  parallel: { rounds: 4, opsPerRound: 2_500, inFlight: 64 },
  contended: {
    workers: 16,
    runs: [
      { sectionMs: 20, durationMs: 10_000 },
      { sectionMs: 1, durationMs: 5_000 },
    ],
  },
  // ttl 6 s: our watchdog renews every 2 s (3 rounds in 7 s), redis-semaphore at 4.8 s, redlock at 5.5 s.
  held: { locks: 10_000, ttl: 6_000, holdMs: 7_000 },
};

const QUICK: BenchConfig = {
  quick: true,
  sequential: { rounds: 3, cyclesPerRound: 300 },
  parallel: { rounds: 2, opsPerRound: 1_000, inFlight: 64 },
  contended: {
    workers: 16,
    runs: [
      { sectionMs: 20, durationMs: 2_500 },
      { sectionMs: 1, durationMs: 1_000 },
    ],
  },
  held: { locks: 2_000, ttl: 3_000, holdMs: 3_500 },
};

export function benchConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  return env.BENCH_QUICK === '1' ? QUICK : FULL;
}
