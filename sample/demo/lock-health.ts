/**
 * The three numbers an operator watches for one lock, read from the instances' /metrics endpoints
 * (what Prometheus would scrape), summed over the instances, for the span between two scrapes.
 */
import { PromSample, scrape } from './prometheus-text';

interface Series {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every instance's samples at one moment, summed by series (name + labels other than the OTel scope). */
export type MetricsSnapshot = Map<string, Series>;

function seriesOf(s: PromSample): [string, Series] {
  const labels = Object.fromEntries(Object.entries(s.labels).filter(([k]) => !k.startsWith('otel_scope_')));
  const key = JSON.stringify([s.name, Object.entries(labels).sort(([a], [b]) => a.localeCompare(b))]);
  return [key, { name: s.name, labels, value: s.value }];
}

/** Scrapes every port and sums the series over the instances. */
export async function snapshotMetrics(ports: readonly number[]): Promise<MetricsSnapshot> {
  return sumInstances(await Promise.all(ports.map(scrape)));
}

/** The samples of several instances, summed by series. */
export function sumInstances(instances: readonly PromSample[][]): MetricsSnapshot {
  const sum: MetricsSnapshot = new Map();
  for (const samples of instances) {
    for (const sample of samples) {
      const [key, series] = seriesOf(sample);
      const seen = sum.get(key);
      if (seen) seen.value += series.value;
      else sum.set(key, series);
    }
  }
  return sum;
}

export interface LockHealth {
  lockName: string;
  /** Acquisitions that ended in the window. */
  attempts: number;
  /** busy + timeout + error. */
  failures: number;
  /** The failures by outcome (busy, timeout, error); outcomes with none are left out. */
  failuresByOutcome: Record<string, number>;
  failureRate: number;
  /** Time waiting for the lock, from the lock_wait_duration histogram (seconds; bucket-interpolated like histogram_quantile). */
  waitP50: number;
  waitP99: number;
  /** The bucket p99 fell in (seconds): the true p99 is somewhere inside; the estimate assumes waits spread evenly across it. */
  waitP99Bucket: [number, number];
  waitMean: number;
  releaseValidationFailures: number;
  lost: number;
}

/** after − before, per series (counters and histograms are cumulative; a series absent before counts from 0). */
function delta(before: MetricsSnapshot, after: MetricsSnapshot): Series[] {
  return [...after].map(([key, s]) => ({ ...s, value: s.value - (before.get(key)?.value ?? 0) }));
}

export function lockHealth(before: MetricsSnapshot, after: MetricsSnapshot, lockName: string): LockHealth {
  const series = delta(before, after).filter((s) => s.labels.lock_name === lockName);
  const total = (name: string, match: (l: Record<string, string>) => boolean = () => true) =>
    series.filter((s) => s.name === name && match(s.labels)).reduce((n, s) => n + s.value, 0);
  const attempts = total('lock_acquire_attempts_total');
  const failuresByOutcome: Record<string, number> = {};
  for (const outcome of ['busy', 'timeout', 'error']) {
    const n = total('lock_acquire_attempts_total', (l) => l.lock_outcome === outcome);
    if (n > 0) failuresByOutcome[outcome] = n;
  }
  const failures = Object.values(failuresByOutcome).reduce((a, b) => a + b, 0);
  const waits = series.filter((s) => s.name === 'lock_wait_duration_bucket');
  const count = total('lock_wait_duration_count');
  const p99 = quantile(waits, 0.99);
  return {
    lockName,
    attempts,
    failures,
    failuresByOutcome,
    failureRate: attempts > 0 ? failures / attempts : 0,
    waitP50: quantile(waits, 0.5).estimate,
    waitP99: p99.estimate,
    waitP99Bucket: p99.bucket,
    waitMean: count > 0 ? total('lock_wait_duration_sum') / count : 0,
    releaseValidationFailures: total('lock_release_validation_failures_total'),
    lost: total('lock_lost_total'),
  };
}

/** Prometheus' histogram_quantile over cumulative `le` buckets (summed over every other label): linear within the bucket. */
function quantile(buckets: readonly Series[], q: number): { estimate: number; bucket: [number, number] } {
  const byLe = new Map<number, number>();
  for (const b of buckets) {
    const le = b.labels.le === '+Inf' ? Infinity : Number(b.labels.le);
    byLe.set(le, (byLe.get(le) ?? 0) + b.value);
  }
  const bounds = [...byLe].sort(([a], [b]) => a - b);
  const count = bounds.at(-1)?.[1] ?? 0;
  if (count === 0) return { estimate: 0, bucket: [0, 0] };
  const rank = q * count;
  let lower = 0;
  let below = 0;
  for (const [le, cumulative] of bounds) {
    if (cumulative >= rank) {
      // Beyond the last finite bound: that bound, as Prometheus does.
      if (le === Infinity) return { estimate: lower, bucket: [lower, Infinity] };
      return { estimate: lower + (le - lower) * ((rank - below) / Math.max(1, cumulative - below)), bucket: [lower, le] };
    }
    lower = le;
    below = cumulative;
  }
  return { estimate: lower, bucket: [lower, Infinity] };
}
