/** Sizes of every workload; BENCH_QUICK=1 gives a ~1 minute smoke run with the same code paths. */
export interface BenchConfig {
  quick: boolean;
  sequential: { rounds: number; cyclesPerRound: number };
  parallel: { rounds: number; opsPerRound: number; inFlight: number };
  /**
   * Each section length runs `repeats` times per library, interleaved across libraries, each
   * repeat lasting durationMs / repeats: `durationMs` is the total per library.
   */
  contended: { workers: number; runs: Array<{ sectionMs: number; durationMs: number; repeats: number }> };
  held: { locks: number; ttl: number; holdMs: number };
}

const FULL: BenchConfig = {
  quick: false,
  // Many short rounds interleaved across libraries, each on a fresh server: the VM's speed drifts
  // by up to 2× within a minute, so ratios are taken round by round (paired) and the median
  // reported; libraries measured a minute apart are never compared directly.
  sequential: { rounds: 15, cyclesPerRound: 800 },
  parallel: { rounds: 9, opsPerRound: 2_000, inFlight: 64 },
  contended: {
    workers: 16,
    runs: [
      // Four repeats: the Redis CPU target is the median of per-repeat ratios to the perfect-handover floor.
      { sectionMs: 20, durationMs: 10_000, repeats: 4 },
      { sectionMs: 1, durationMs: 5_000, repeats: 4 },
    ],
  },
  // ttl 6 s: our watchdog renews every 2 s (3 rounds in 7 s), redis-semaphore at 4.8 s, redlock at 5.5 s.
  held: { locks: 10_000, ttl: 6_000, holdMs: 7_000 },
};

const QUICK: BenchConfig = {
  quick: true,
  sequential: { rounds: 5, cyclesPerRound: 300 },
  parallel: { rounds: 3, opsPerRound: 1_000, inFlight: 64 },
  contended: {
    workers: 16,
    runs: [
      { sectionMs: 20, durationMs: 2_500, repeats: 2 },
      { sectionMs: 1, durationMs: 1_000, repeats: 2 },
    ],
  },
  held: { locks: 2_000, ttl: 3_000, holdMs: 3_500 },
};

export function benchConfig(env: NodeJS.ProcessEnv = process.env): BenchConfig {
  return env.BENCH_QUICK === '1' ? QUICK : FULL;
}
