/**
 * The demo's reading of /metrics (sample/demo/lock-health.ts): Prometheus text as the real exporter
 * writes it for two instances, summed, differenced between two scrapes, quantiles from the buckets.
 */
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { lockHealth, sumInstances } from '../../sample/demo/lock-health';
import { parsePrometheusText } from '../../sample/demo/prometheus-text';
import { INSTRUMENTATION_NAME, LOCK_METRIC_NAMES } from '../../lib/observability/otel-lock-metrics';

/** One "instance": a MeterProvider read by a Prometheus exporter, instruments named as the library names them. */
class Instance {
  private readonly exporter = new PrometheusExporter({ preventServerStart: true });
  private readonly provider = new MeterProvider({ readers: [this.exporter] });
  private readonly meter = this.provider.getMeter(INSTRUMENTATION_NAME);
  readonly attempts = this.meter.createCounter(LOCK_METRIC_NAMES.acquireAttempts);
  readonly wait = this.meter.createHistogram(LOCK_METRIC_NAMES.waitDuration, {
    unit: 's',
    advice: { explicitBucketBoundaries: [0.1, 0.2, 0.5, 1, 2] },
  });
  readonly validation = this.meter.createCounter(LOCK_METRIC_NAMES.releaseValidationFailures);

  acquire(name: string, outcome: string, waitS: number): void {
    this.attempts.add(1, { 'lock.name': name, 'lock.outcome': outcome, 'lock.waited': waitS > 0.05 });
    this.wait.record(waitS, { 'lock.name': name, 'lock.outcome': outcome });
  }

  async text(): Promise<string> {
    const { resourceMetrics } = await this.exporter.collect();
    return new PrometheusSerializer().serialize(resourceMetrics);
  }

  shutdown(): Promise<void> {
    return this.provider.shutdown();
  }
}

describe('demo: lock health read from Prometheus text', () => {
  const instances = [new Instance(), new Instance()];
  afterAll(() => Promise.all(instances.map((i) => i.shutdown())));
  const scrapeAll = async () => sumInstances(await Promise.all(instances.map(async (i) => parsePrometheusText(await i.text()))));

  it('sums instances, counts only the window between scrapes and only the named lock', async () => {
    const [a, b] = instances;
    a.acquire('campaign:<0>', 'acquired', 0.15); // before the window: must not count
    a.validation.add(1, { 'lock.name': 'campaign:<0>' });
    const before = await scrapeAll();

    // In the window: 10 acquisitions of the claim lock over two instances, 2 of them failed; another lock's noise.
    for (const w of [0.15, 0.15, 0.15, 0.3, 0.3]) a.acquire('campaign:<0>', 'acquired', w);
    for (const w of [0.15, 0.3, 0.7]) b.acquire('campaign:<0>', 'acquired', w);
    b.acquire('campaign:<0>', 'timeout', 1.5);
    a.acquire('campaign:<0>', 'error', 0.05);
    b.acquire('jobs:settle', 'busy', 0.001);
    b.validation.add(2, { 'lock.name': 'campaign:<0>' });
    b.validation.add(5, { 'lock.name': 'jobs:settle' });
    const h = lockHealth(before, await scrapeAll(), 'campaign:<0>');

    expect(h).toMatchObject({ attempts: 10, failures: 2, failuresByOutcome: { timeout: 1, error: 1 }, releaseValidationFailures: 2 });
    expect(h.failureRate).toBeCloseTo(0.2);
    expect(h.waitMean).toBeCloseTo((0.15 * 4 + 0.3 * 3 + 0.7 + 1.5 + 0.05) / 10);
    // Buckets ≤0.1: 1, ≤0.2: 5, ≤0.5: 8, ≤1: 9, ≤2: 10. p50 = rank 5 → the top of (0.1, 0.2]; p99 = rank 9.9 → 90 % into (1, 2].
    expect(h.waitP50).toBeCloseTo(0.2);
    expect(h.waitP99).toBeCloseTo(1.9);
    expect(h.waitP99Bucket).toEqual([1, 2]);
  });

  it('parses label values with escaped quotes and backslashes', () => {
    const [s] = parsePrometheusText('m_total{lock_name="a \\"b\\" \\\\c",x="1"} 3\n');
    expect(s).toEqual({ name: 'm_total', labels: { lock_name: 'a "b" \\c', x: '1' }, value: 3 });
  });
});
