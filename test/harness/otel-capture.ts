/**
 * A real OpenTelemetry SDK registered globally for one suite: a MeterProvider with a reader the test
 * collects from, and a tracer provider exporting to memory. What the library recorded is read back
 * exactly as an exporter would see it.
 */
import { Attributes, metrics, trace } from '@opentelemetry/api';
import { DataPointType, MeterProvider, MetricReader, type MetricData } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';

/** Collected on demand (no timer): `collect()` is the whole export path minus the wire. */
class CollectingReader extends MetricReader {
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** One data point of a counter or histogram, flattened. */
export interface Point {
  metric: string;
  attributes: Attributes;
  /** Counter value, or histogram count. */
  value: number;
  /** Histograms only. */
  sum?: number;
  min?: number;
  max?: number;
}

export class OtelCapture {
  private readonly reader = new CollectingReader();
  private readonly meterProvider = new MeterProvider({ readers: [this.reader] });
  readonly spans = new InMemorySpanExporter();
  private readonly tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(this.spans)] });

  /** Registers both providers as the global ones (replacing whatever an earlier suite left). */
  install(): void {
    metrics.disable();
    trace.disable();
    if (!metrics.setGlobalMeterProvider(this.meterProvider)) throw new Error('could not register the MeterProvider');
    if (!trace.setGlobalTracerProvider(this.tracerProvider)) throw new Error('could not register the TracerProvider');
  }

  async uninstall(): Promise<void> {
    metrics.disable();
    trace.disable();
    await this.meterProvider.shutdown();
    await this.tracerProvider.shutdown();
  }

  /** Names of the meters (instrumentation scopes) that recorded something. */
  async meterNames(): Promise<string[]> {
    return (await this.reader.collect()).resourceMetrics.scopeMetrics.map((s) => s.scope.name);
  }

  /** Every data point recorded so far (cumulative), by metric. */
  async points(): Promise<Point[]> {
    const { resourceMetrics, errors } = await this.reader.collect();
    if (errors.length) throw new AggregateError(errors, 'metric collection failed');
    const out: Point[] = [];
    for (const scope of resourceMetrics.scopeMetrics) for (const m of scope.metrics) out.push(...flatten(m));
    return out;
  }

  /** Points of `metric` whose attributes include `match`. */
  async find(metric: string, match: Attributes = {}): Promise<Point[]> {
    return (await this.points()).filter((p) => p.metric === metric && Object.entries(match).every(([k, v]) => p.attributes[k] === v));
  }

  /** Sum of the values of the matching points (0 when none). */
  async total(metric: string, match: Attributes = {}): Promise<number> {
    return (await this.find(metric, match)).reduce((sum, p) => sum + p.value, 0);
  }

  finishedSpans(name: string): ReadableSpan[] {
    return this.spans.getFinishedSpans().filter((s) => s.name === name);
  }
}

function flatten(m: MetricData): Point[] {
  const metric = m.descriptor.name;
  if (m.dataPointType === DataPointType.HISTOGRAM) {
    return m.dataPoints.map((p) => ({
      metric,
      attributes: p.attributes,
      value: p.value.count,
      sum: p.value.sum,
      min: p.value.min,
      max: p.value.max,
    }));
  }
  if (m.dataPointType === DataPointType.SUM || m.dataPointType === DataPointType.GAUGE) {
    return m.dataPoints.map((p) => ({ metric, attributes: p.attributes, value: p.value }));
  }
  throw new Error(`${metric}: ${DataPointType[m.dataPointType]} points are not expected from this library`);
}
