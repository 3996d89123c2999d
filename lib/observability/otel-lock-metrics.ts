import { performance } from 'node:perf_hooks';
import type { Attributes, Counter, Histogram, Meter, MeterProvider, Tracer, TracerProvider } from '@opentelemetry/api';
import type { LockLostReason } from '../errors/lock-lost.error';
import type { AcquireRecord, DeferOutcome, LockMetrics, RenewalOutcome } from './lock-metrics';
import { NO_LOCK_METRICS } from './lock-metrics';
import { isolatedLockMetrics } from './isolated-lock-metrics';
import { OpenTelemetryApi, loadOpenTelemetryApi } from './otel-api';

/** Meter and tracer name: the package name (checked against package.json by test/unit/lock-metrics.spec.ts). */
export const INSTRUMENTATION_NAME = 'nestjs-distributed-lock';

/**
 * Seconds, from a loopback round trip (~0.2 ms) to a long wait or critical section: OpenTelemetry's default
 * millisecond boundaries (1-2.5-5-7.5 per decade) in seconds, extended both ways. A View can replace them.
 */
const DURATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 300];

/** The public metric names (a fixed contract: dashboards and alerts are written against them). */
export const LOCK_METRIC_NAMES = {
  acquireAttempts: 'lock.acquire.attempts',
  waitDuration: 'lock.wait.duration',
  holdDuration: 'lock.hold.duration',
  releaseValidationFailures: 'lock.release.validation_failures',
  releaseErrors: 'lock.release.errors',
  lost: 'lock.lost',
  renewals: 'lock.renewals',
  deferred: 'lock.deferred',
  deferDuration: 'lock.defer.duration',
} as const;

interface Instruments {
  acquireAttempts: Counter;
  waitDuration: Histogram;
  holdDuration: Histogram;
  releaseValidationFailures: Counter;
  releaseErrors: Counter;
  lost: Counter;
  renewals: Counter;
  deferred: Counter;
  deferDuration: Histogram;
}

function createInstruments(meter: Meter): Instruments {
  const n = LOCK_METRIC_NAMES;
  const seconds = { unit: 's', advice: { explicitBucketBoundaries: DURATION_BUCKETS } };
  return {
    acquireAttempts: meter.createCounter(n.acquireAttempts, {
      description: 'Lock acquisitions by outcome (acquired, busy, timeout, aborted, closed, error).',
    }),
    waitDuration: meter.createHistogram(n.waitDuration, { ...seconds, description: 'Time from asking for a lock to getting it or giving up.' }),
    holdDuration: meter.createHistogram(n.holdDuration, { ...seconds, description: 'Time a lock was held, from acquisition to release().' }),
    releaseValidationFailures: meter.createCounter(n.releaseValidationFailures, {
      description: 'Releases that found the lease already gone: the critical section outran its TTL.',
    }),
    releaseErrors: meter.createCounter(n.releaseErrors, {
      description: 'Releases that failed (Redis unreachable or too slow): the key stays taken until its lease lapses.',
    }),
    lost: meter.createCounter(n.lost, { description: 'Held leases lost before release(), by reason.' }),
    renewals: meter.createCounter(n.renewals, { description: 'Watchdog renewals by outcome (renewed, lost, error).' }),
    deferred: meter.createCounter(n.deferred, { description: "Deferred calls (onBusy 'defer') by outcome (enqueued, retried, completed, failed)." }),
    deferDuration: meter.createHistogram(n.deferDuration, {
      ...seconds,
      description: 'Time from deferring a call (or retrying its failed job by its deferKey) to its completion or final failure.',
    }),
  };
}

/**
 * LockMetrics over the global OpenTelemetry API. The global meter provider has no proxy (unlike the
 * tracer provider), so instruments are made again whenever a different provider is registered: a
 * provider set up after the LockService was created is still used.
 */
class OpenTelemetryLockMetrics implements LockMetrics {
  private meterProvider?: MeterProvider;
  private instrumentsOfProvider?: Instruments;
  private tracerProvider?: TracerProvider;
  private tracerOfProvider?: Tracer;

  constructor(private readonly api: OpenTelemetryApi) {}

  private get instruments(): Instruments {
    const provider = this.api.metrics.getMeterProvider();
    if (provider !== this.meterProvider || !this.instrumentsOfProvider) {
      this.meterProvider = provider;
      this.instrumentsOfProvider = createInstruments(provider.getMeter(INSTRUMENTATION_NAME));
    }
    return this.instrumentsOfProvider;
  }

  private get tracer(): Tracer {
    const provider = this.api.trace.getTracerProvider();
    if (provider !== this.tracerProvider || !this.tracerOfProvider) {
      this.tracerProvider = provider;
      this.tracerOfProvider = provider.getTracer(INSTRUMENTATION_NAME);
    }
    return this.tracerOfProvider;
  }

  acquireFinished(r: AcquireRecord): void {
    const waitSeconds = (r.endedAt - r.startedAt) / 1000;
    const { acquireAttempts, waitDuration } = this.instruments;
    acquireAttempts.add(1, { 'lock.name': r.name, 'lock.outcome': r.outcome, 'lock.waited': r.waited });
    waitDuration.record(waitSeconds, { 'lock.name': r.name, 'lock.outcome': r.outcome });
    this.span(r, waitSeconds);
  }

  /** One span per acquisition, written when it ended with the times it really started and ended (a no-op without a tracer provider). */
  private span(r: AcquireRecord, waitSeconds: number): void {
    const span = this.tracer.startSpan('lock.acquire', { kind: this.api.SpanKind.INTERNAL, startTime: epochMs(r.startedAt) });
    // Without a tracer provider (or when not sampled) the span records nothing: skip building its attributes.
    if (span.isRecording()) {
      const attributes: Attributes = {
        'lock.name': r.name,
        'lock.outcome': r.outcome,
        'lock.waited': r.waited,
        'lock.wait.duration': waitSeconds,
        'lock.attempts': r.attempts,
      };
      if (r.fencingToken !== undefined) attributes['lock.fencing_token'] = r.fencingToken;
      span.setAttributes(attributes);
      if (r.outcome === 'timeout' || r.outcome === 'error') span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: r.outcome });
    }
    span.end(epochMs(r.endedAt));
  }

  held(name: string, heldMs: number): void {
    this.instruments.holdDuration.record(heldMs / 1000, { 'lock.name': name });
  }

  releaseValidationFailed(name: string): void {
    this.instruments.releaseValidationFailures.add(1, { 'lock.name': name });
  }

  releaseFailed(name: string): void {
    this.instruments.releaseErrors.add(1, { 'lock.name': name });
  }

  lost(name: string, reason: LockLostReason): void {
    this.instruments.lost.add(1, { 'lock.name': name, 'lock.lost.reason': reason });
  }

  renewal(name: string, outcome: RenewalOutcome): void {
    this.instruments.renewals.add(1, { 'lock.name': name, 'lock.outcome': outcome });
  }

  deferred(name: string, outcome: DeferOutcome): void {
    this.instruments.deferred.add(1, { 'lock.name': name, 'lock.outcome': outcome });
  }

  deferDuration(name: string, outcome: 'completed' | 'failed', ms: number): void {
    this.instruments.deferDuration.record(ms / 1000, { 'lock.name': name, 'lock.outcome': outcome });
  }
}

/** Monotonic ms (performance.now()) to wall-clock epoch ms, as span times expect. */
const epochMs = (monotonicMs: number) => performance.timeOrigin + monotonicMs;

/**
 * The engine's metrics: recorded through OpenTelemetry when `@opentelemetry/api` is installed (a failure
 * of the user's telemetry is reported through `report` and never reaches a lock call), nothing otherwise.
 */
export function createLockMetrics(report: (message: string) => void): LockMetrics {
  const api = loadOpenTelemetryApi();
  return api ? isolatedLockMetrics(new OpenTelemetryLockMetrics(api), report) : NO_LOCK_METRICS;
}
