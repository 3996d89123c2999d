/**
 * What the T12 and T15 specs share: the profile (CI or SOAK=1), the seed line, and a tally of the
 * runs for the closing summary (sections, wall time, overlaps, fence inversions, connection errors).
 */
import type { RunReport } from './run-workload';

export const SOAK = process.env.SOAK === '1';

/**
 * Timer lateness and scheduling allowed on top of every call's documented bound. Measured on this
 * 2-core machine shared with other test runs (load 2–6): calls that hit commandTimeout with Redis
 * stopped overran it by at most 4 ms (throw, fail-fast, release) and 64 ms (retry), apart from the
 * CommandDeadlines defect (test/unit/command-deadlines-bound.spec.ts), which adds a whole timeout.
 * 250 ms leaves room for a busier machine without hiding a missing timeout (bounds are 0.3–5 s).
 */
export const SLACK_MS = 250;

export class Tally {
  runs = 0;
  sections = 0;
  ms = 0;
  overlaps = 0;
  fenceInversions = 0;
  otherViolations = 0;
  calls = 0;
  connectionErrorsHealthy = 0;
  callsHealthy = 0;
  maxOverrunMs = -Infinity;

  add(r: RunReport): void {
    const c = r.check;
    this.runs++;
    this.sections += c.sections;
    this.ms += r.ms;
    this.overlaps += c.holdViolations.filter((v) => v.kind === 'overlap').length;
    this.fenceInversions += c.holdViolations.filter((v) => v.kind === 'fence-order').length;
    this.otherViolations += c.holdViolations.filter((v) => v.kind !== 'overlap' && v.kind !== 'fence-order').length + c.callViolations.length;
    this.calls += c.calls.calls;
    if (!r.redisFaulted) {
      this.connectionErrorsHealthy += c.calls.errors.LockConnectionError ?? 0;
      this.callsHealthy += c.calls.calls;
    }
    this.maxOverrunMs = Math.max(this.maxOverrunMs, ...Object.values(c.calls.maxOverrunMs));
  }

  line(label: string, seed: number): string {
    const healthy = this.callsHealthy > 0 ? `${((this.connectionErrorsHealthy / this.callsHealthy) * 100).toFixed(3)} %` : 'n/a';
    return (
      `${label} SEED=${seed}: ${this.runs} runs, ${this.sections} sections in ${(this.ms / 1000).toFixed(1)} s of running, ${this.calls} calls; ` +
      `overlaps ${this.overlaps}, fence inversions ${this.fenceInversions}, other violations ${this.otherViolations}; ` +
      `LockConnectionError on healthy Redis ${healthy}; largest overrun of a bound ${this.maxOverrunMs.toFixed(1)} ms (slack ${SLACK_MS})`
    );
  }
}
