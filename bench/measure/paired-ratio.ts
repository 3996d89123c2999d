/**
 * Ratios of two series measured side by side, taken round by round. Rounds are interleaved across
 * libraries, so round r of every library ran within the same few seconds: a per-round ratio
 * cancels the machine's drift (up to 2× within a minute on a shared VM), which a ratio of two
 * medians — possibly from rounds a minute apart — does not.
 */
export interface PairedRatio {
  /** ours[r] / reference[r] for every round r. */
  ratios: number[];
  /** Middle ratio; for an even count the midpoint of the two middle ones, so neither side of a ≥ or ≤ target is favoured. */
  median: number;
  min: number;
  max: number;
}

export function pairedRatio(ours: readonly number[], reference: readonly number[]): PairedRatio {
  if (ours.length !== reference.length) throw new Error(`paired series differ in length: ${ours.length} vs ${reference.length}`);
  const ratios = ours.map((value, r) => value / reference[r]);
  return { ratios, median: midpoint(ratios), min: Math.min(...ratios), max: Math.max(...ratios) };
}

function midpoint(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  return Number.isInteger(mid) ? (sorted[mid - 1] + sorted[mid]) / 2 : sorted[Math.floor(mid)];
}

/** Round by round, the best of several libraries' values (e.g. the fastest peer in that round). */
export function bestPerRound(series: ReadonlyArray<readonly number[]>, pick: (...values: number[]) => number): number[] {
  const rounds = Math.min(...series.map((s) => s.length));
  return Array.from({ length: rounds }, (_, r) => pick(...series.map((s) => s[r])));
}
