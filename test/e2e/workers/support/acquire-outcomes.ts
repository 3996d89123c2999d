import type { LockService } from '../../../../lib';
import type { AcquireOutcome } from '../../../../lib/observability/lock-metrics';

/**
 * The outcomes `service` reports to its metrics from now on, in order (acquired, busy, aborted, …), each record still
 * passed on to the metrics. A jest spy: restored with the others (restoreAllMocks, or the suite's end).
 */
export function acquireOutcomesOf(service: LockService): AcquireOutcome[] {
  const outcomes: AcquireOutcome[] = [];
  const metrics = service.engine.metrics;
  const report = metrics.acquireFinished.bind(metrics);
  jest.spyOn(metrics, 'acquireFinished').mockImplementation((record) => {
    outcomes.push(record.outcome);
    report(record);
  });
  return outcomes;
}
