import type { LockMetrics } from './lock-metrics';

type Report = (message: string) => void;

/**
 * LockMetrics that never throw into the engine. Telemetry runs user code (a meter, a span processor,
 * an exporter) in the middle of acquire, release, loss and the watchdog's tick: a throw there would
 * leave a lock taken but never handed to its caller (held and renewed for nobody), or stop a renewal
 * pass half-way and have the watchdog retry it without pause. A failure is reported once per kind of
 * record (a broken exporter fails on every lock call), then the record is dropped.
 */
export function isolatedLockMetrics(inner: LockMetrics, report: Report): LockMetrics {
  const reported = new Set<keyof LockMetrics>();
  const guard =
    <K extends keyof LockMetrics>(kind: K) =>
    (...args: Parameters<LockMetrics[K]>): void => {
      try {
        (inner[kind] as (...a: Parameters<LockMetrics[K]>) => void)(...args);
      } catch (error) {
        if (reported.has(kind)) return;
        reported.add(kind);
        report(
          `Recording lock telemetry (${kind}) failed, so it is skipped; locks are not affected. Reported once per kind: ` +
            `check the OpenTelemetry meter, span processors and exporters. ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    };
  return {
    acquireFinished: guard('acquireFinished'),
    held: guard('held'),
    releaseValidationFailed: guard('releaseValidationFailed'),
    releaseFailed: guard('releaseFailed'),
    lost: guard('lost'),
    renewal: guard('renewal'),
    deferred: guard('deferred'),
    deferDuration: guard('deferDuration'),
  };
}
