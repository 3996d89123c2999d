/**
 * The whole check of one run's history: fold the events, check the holds (overlap, fence order) and
 * the calls (bounds, settlement, allowed errors). Pure: the caller brings the events, the fault
 * windows and the bounds; stray keys are checked apart (they need Redis).
 */
import { checkCalls, CallContext, CallStats, CallViolation } from './check-calls';
import { checkHolds, HoldViolation } from './check-holds';
import type { HistoryEvent } from './events';
import { foldHistory, Hold } from './fold';

export interface HistoryCheck {
  /** Top-level holds whose body ran (nested ones not counted). */
  sections: number;
  /** Nested acquisitions granted (borrowed or not). */
  nested: number;
  /** Holds that confirmed their lease at least once (the ones placed in time). */
  confirmed: number;
  holds: number;
  holdViolations: HoldViolation[];
  callViolations: CallViolation[];
  calls: CallStats;
}

export function checkEventHistory(events: readonly HistoryEvent[], ctx: CallContext): HistoryCheck {
  const { calls, holds } = foldHistory(events);
  const callCheck = checkCalls(calls, holds, ctx);
  return {
    sections: holds.filter((h) => !h.parent && h.exit).length,
    nested: holds.filter((h) => h.parent).length,
    confirmed: holds.filter((h) => h.to !== undefined).length,
    holds: holds.length,
    holdViolations: checkHolds(holds),
    callViolations: callCheck.violations,
    calls: callCheck.stats,
  };
}

/** A hold with the events that place it, for a report a person can debug from. */
function describeHold(h: Hold): object {
  return {
    worker: h.w,
    lock: h.lock,
    keys: h.invoke.keys,
    policy: h.invoke.policy,
    parent: h.parent?.lock,
    invoke: h.invoke.t,
    grant: h.grant,
    lastHeld: h.lastHeld,
    notHeld: h.notHeld,
    loss: h.loss,
    release: h.release,
  };
}

/** One line per violation, JSON, with both holds' (or the call's) events. */
export function formatViolations(check: HistoryCheck, limit = 20): string {
  const lines = [
    ...check.holdViolations.map(
      (v) =>
        `${v.kind} on "${v.key}": ${v.detail}\n  a=${JSON.stringify(describeHold(v.a))}${v.b ? `\n  b=${JSON.stringify(describeHold(v.b))}` : ''}`,
    ),
    ...check.callViolations.map((v) => `${v.kind}: ${v.detail}\n  invoke=${JSON.stringify(v.invoke)}\n  done=${JSON.stringify(v.done)}`),
  ];
  const shown = lines.slice(0, limit).join('\n');
  return lines.length > limit ? `${shown}\n… and ${lines.length - limit} more` : shown;
}
