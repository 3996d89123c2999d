/**
 * Liveness of the calls: every call settles, within its documented bound, with an error its policy
 * allows. Bounds (ms), each plus a measured `slack` for timer lateness and scheduling:
 * - acquire, 'retry':            waitTimeout + commandTimeout (the last attempt may be on the wire at the deadline)
 * - acquire, 'throw'/'fail-fast': commandTimeout
 * - release:                      commandTimeout
 * - close:                        shutdownTimeout
 * Time a worker spent SIGSTOPped by the test is taken out of its calls' durations (and reported):
 * a stopped process cannot be expected to answer. A call of a worker killed with kill -9 that had not
 * settled is cut, not late; any other call without a completion is a violation.
 */
import type { Completion, InvokeEvent } from './events';
import type { CallRecord, Hold } from './fold';

export interface CallBounds {
  commandTimeoutMs: number;
  shutdownTimeoutMs: number;
  slackMs: number;
}

/** A worker was stopped (SIGSTOP) from `from` to `to` (SIGCONT), hrtime ns. */
export interface PauseWindow {
  w: string;
  from: bigint;
  to: bigint;
}

export interface CallContext {
  bounds: CallBounds;
  pauses: readonly PauseWindow[];
  /** Workers killed with kill -9. */
  killed: ReadonlySet<string>;
}

export type CallViolationKind = 'late' | 'unsettled' | 'unexpected-error' | 'reentrancy';

export interface CallViolation {
  kind: CallViolationKind;
  invoke: InvokeEvent;
  done?: Completion;
  detail: string;
}

export interface CallStats {
  calls: number;
  /** Calls of killed workers that never completed. */
  cut: number;
  /** Completions by error type (plus 'busy' for fail-fast). */
  errors: Record<string, number>;
  /** The first message seen of each error type (for the report). */
  errorSamples: Record<string, string>;
  /** Largest duration minus bound (without slack) per kind of call: how much slack was used. */
  maxOverrunMs: Record<string, number>;
  /** Largest stopped time taken out of one call. */
  maxPausedMs: number;
}

/** Errors each kind of call may end with; anything else is a bug (or a lie about the policy). */
const ALLOWED: Record<string, readonly string[]> = {
  'acquire:retry': ['LockTimeoutError', 'LockConnectionError', 'LockServiceClosedError'],
  'acquire:throw': ['LockBusyError', 'LockConnectionError', 'LockServiceClosedError'],
  'acquire:fail-fast': ['LockConnectionError', 'LockServiceClosedError'],
  release: ['LockConnectionError'],
  close: [],
};

const kindOf = (i: InvokeEvent): string => (i.op === 'acquire' ? `acquire:${i.policy ?? 'retry'}` : i.op);

function boundMs(i: InvokeEvent, b: CallBounds): number {
  if (i.op === 'close') return b.shutdownTimeoutMs;
  if (i.op === 'acquire' && (i.policy ?? 'retry') === 'retry') return (i.wait ?? 0) + b.commandTimeoutMs;
  return b.commandTimeoutMs;
}

function pausedNs(w: string, from: bigint, to: bigint, pauses: readonly PauseWindow[]): bigint {
  let total = 0n;
  for (const p of pauses) {
    if (p.w !== w) continue;
    const lo = p.from > from ? p.from : from;
    const hi = p.to < to ? p.to : to;
    if (hi > lo) total += hi - lo;
  }
  return total;
}

const ms = (ns: bigint): number => Number(ns) / 1e6;

export function checkCalls(
  calls: readonly CallRecord[],
  holds: readonly Hold[],
  ctx: CallContext,
): { violations: CallViolation[]; stats: CallStats } {
  const violations: CallViolation[] = [];
  const stats: CallStats = { calls: calls.length, cut: 0, errors: {}, errorSamples: {}, maxOverrunMs: {}, maxPausedMs: 0 };
  const holdById = new Map(holds.map((h) => [`${h.w}#${h.lock}`, h]));

  for (const { invoke, done } of calls) {
    const kind = kindOf(invoke);
    if (!done) {
      if (ctx.killed.has(invoke.w)) stats.cut++;
      else violations.push({ kind: 'unsettled', invoke, detail: `${kind} of ${invoke.w} never completed` });
      continue;
    }
    const paused = pausedNs(invoke.w, BigInt(invoke.t), BigInt(done.t), ctx.pauses);
    const took = ms(BigInt(done.t) - BigInt(invoke.t) - paused);
    stats.maxPausedMs = Math.max(stats.maxPausedMs, ms(paused));
    const bound = boundMs(invoke, ctx.bounds);
    stats.maxOverrunMs[kind] = Math.max(stats.maxOverrunMs[kind] ?? -Infinity, took - bound);
    if (took > bound + ctx.bounds.slackMs) {
      violations.push({
        kind: 'late',
        invoke,
        done,
        detail: `${kind} took ${took.toFixed(1)} ms (${ms(paused).toFixed(0)} ms stopped not counted), bound ${bound} + ${ctx.bounds.slackMs} ms slack`,
      });
    }

    const failure = done.ev === 'error' ? done.type : done.ev === 'settle' && done.result === 'busy' ? 'busy' : undefined;
    if (failure === undefined) continue;
    stats.errors[failure] = (stats.errors[failure] ?? 0) + 1;
    if (done.ev === 'error') stats.errorSamples[failure] ??= done.message;
    const allowed = failure === 'busy' ? kind === 'acquire:fail-fast' : (ALLOWED[kind] ?? []).includes(failure);
    if (!allowed) {
      violations.push({
        kind: 'unexpected-error',
        invoke,
        done,
        detail: `${kind} ended with ${failure}${done.ev === 'error' ? `: ${done.message}` : ''}`,
      });
    }
    // Reentrancy: a nested acquire of keys its outer lock held throughout must not find them busy.
    const outer = invoke.parent === undefined ? undefined : holdById.get(`${invoke.w}#${invoke.parent}`);
    if (outer?.to !== undefined && outer.to >= BigInt(done.t) && ['busy', 'LockBusyError', 'LockTimeoutError'].includes(failure)) {
      violations.push({
        kind: 'reentrancy',
        invoke,
        done,
        detail: `nested acquire inside ${invoke.w} lock ${invoke.parent} (held until after it) ended with ${failure}`,
      });
    }
  }
  return { violations, stats };
}
