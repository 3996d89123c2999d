/**
 * What makes a T12/T15 run pass, as one list of problems (empty: pass), so a failing run says
 * everything at once: which faults did not fire, which invariants broke (each violation with both
 * events), and how to replay it.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { formatViolations } from '../../harness/event-history/check-history';
import type { RunReport } from './run-workload';

/** LockConnectionError share allowed when Redis itself was healthy all run (T12). */
export const HEALTHY_CONNECTION_ERROR_SHARE = 0.01;

export function runProblems(r: RunReport, planned: number): string[] {
  const problems: string[] = [];
  for (const f of r.faults.filter((f) => !f.happened)) problems.push(`fault ${f.kind} did not happen: ${f.evidence}`);
  if (r.faults.length !== r.workload.faults.length) problems.push(`${r.workload.faults.length} faults planned, ${r.faults.length} injected`);
  if (r.proxy && r.workload.jitterMs > 0) {
    const meanMs = r.proxy.addedMs / Math.max(1, r.proxy.chunks);
    if (r.proxy.overtaken === 0 || meanMs < 2) problems.push(`the proxy did not reorder/delay: ${JSON.stringify(r.proxy)}`);
  }
  for (const w of r.workers) {
    if (w.hung) problems.push(`worker ${w.name} still running at the time cap (killed): ${w.stderr}`);
    else if (!w.killed && (w.exit?.code !== 0 || !w.done))
      problems.push(`worker ${w.name} exited ${JSON.stringify(w.exit)} without finishing: ${w.stderr}`);
  }
  if (r.check.sections < planned) problems.push(`${r.check.sections} sections, ${planned} planned`);
  if (r.check.holdViolations.length + r.check.callViolations.length > 0) {
    problems.push(`${r.check.holdViolations.length} hold and ${r.check.callViolations.length} call violations:\n${formatViolations(r.check)}`);
  }
  if (r.stray.length > 0) problems.push(`keys left after quiescence: ${JSON.stringify(r.stray.slice(0, 20))}`);
  if (!r.redisFaulted && r.connectionErrorShare >= HEALTHY_CONNECTION_ERROR_SHARE) {
    problems.push(
      `LockConnectionError on a healthy Redis: ${(r.connectionErrorShare * 100).toFixed(2)} % of calls (${r.check.calls.errorSamples.LockConnectionError})`,
    );
  }
  return problems;
}

const count = (r: RunReport, kind: string): number => r.check.holdViolations.filter((v) => v.kind === kind).length;

/** One line of figures per run, for the log and the README. */
export function runSummary(label: string, r: RunReport): string {
  const c = r.check;
  const overrun = Object.entries(c.calls.maxOverrunMs)
    .map(([k, v]) => `${k} ${v.toFixed(0)}`)
    .join(', ');
  return (
    `${label} [${r.runId}]: ${c.sections} sections (+${c.nested} nested) in ${(r.ms / 1000).toFixed(1)} s (${Math.round(c.sections / (r.ms / 1000))}/s), ` +
    `${c.calls.calls} calls; overlaps ${count(r, 'overlap')}, fence inversions ${count(r, 'fence-order')}, other hold violations ` +
    `${c.holdViolations.length - count(r, 'overlap') - count(r, 'fence-order')}, call violations ${c.callViolations.length}; ` +
    `LockConnectionError ${(r.connectionErrorShare * 100).toFixed(3)} %; outcomes ${JSON.stringify(c.calls.errors)}; ` +
    `max overrun of bound (ms) {${overrun}}; stopped time excluded max ${c.calls.maxPausedMs.toFixed(0)} ms; ` +
    `faults ${JSON.stringify(r.faults.map((f) => `${f.kind}${f.target ? ` ${f.target}` : ''}: ${f.evidence}`))}` +
    (r.proxy ? `; proxy ${JSON.stringify(r.proxy)}` : '')
  );
}

/** Writes the run's whole history (one event per line) where a person can read it; returns the path. */
export function saveHistory(r: RunReport): string {
  const dir = path.join(os.tmpdir(), 'ndl-history');
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${r.runId}.jsonl`);
  fs.writeFileSync(file, r.events.map((e) => JSON.stringify(e)).join('\n') + '\n');
  return file;
}

/** Throws one error with every problem of the run, the seed to replay it, the workload and where its history is. */
export function expectCleanRun(r: RunReport, planned: number, replay: string): void {
  const problems = runProblems(r, planned);
  if (problems.length === 0) return;
  throw new Error(
    `${problems.length} problem(s) in run ${r.runId} — replay: ${replay}\nworkload ${JSON.stringify(r.workload)}\n` +
      `whole history: ${saveHistory(r)}\n- ${problems.join('\n- ')}`,
  );
}
