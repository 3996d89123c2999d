/**
 * Folds a flat event list into calls (invoke + completion) and holds (one granted lock with what
 * happened under it). Pure. A history that breaks the recording rules (a completion without its
 * invoke, two completions, a body event for a lock never granted) is a harness bug and throws,
 * naming the event: a checker that silently skipped it could pass for the wrong reason.
 */
import type { BodyEvent, Completion, ErrorEvent, GrantEvent, HeldEvent, HistoryEvent, InvokeEvent, LossEvent, ReleaseEvent } from './events';

export interface CallRecord {
  invoke: InvokeEvent;
  done?: Completion;
}

export interface Hold {
  w: string;
  /** The lock's id: the id of the acquire call that granted it. */
  lock: number;
  invoke: InvokeEvent;
  grant: GrantEvent;
  /** Grant stamp, ns. */
  from: bigint;
  /**
   * Last moment the holder confirmed the lease (its own `held` check answering true, or one of a
   * borrowing nested lock's, which is only true while this one is): the hold is certain over
   * [from, to]. Undefined: never confirmed, so the checker cannot place it in time.
   */
  to?: bigint;
  /** The `held` event that set `to` (may belong to a nested lock). */
  lastHeld?: HeldEvent;
  /** A `held` check that answered false (the lease had ended before the body did). */
  notHeld?: HeldEvent;
  enter?: BodyEvent;
  exit?: BodyEvent;
  loss?: LossEvent;
  /** Completion of the release call of this lock, if one was made. */
  release?: ReleaseEvent | ErrorEvent;
  /** Set for an acquire inside a body that holds the same keys: the outer lock. */
  parent?: Hold;
  /** Nested on a parent and every key's fence is the parent's: it took nothing itself. */
  borrowed: boolean;
}

export interface FoldedHistory {
  calls: CallRecord[];
  holds: Hold[];
}

const id = (w: string, n: number): string => `${w}#${n}`;

function fail(event: HistoryEvent, why: string): never {
  throw new Error(`malformed history: ${why}: ${JSON.stringify(event)}`);
}

function stampOf(event: HistoryEvent): bigint {
  try {
    return BigInt(event.t);
  } catch {
    return fail(event, 't is not an integer stamp');
  }
}

export function foldHistory(events: readonly HistoryEvent[]): FoldedHistory {
  const calls = new Map<string, CallRecord>();
  const holds = new Map<string, Hold>();
  // Releases name their lock in the invoke; the completion only names the call.
  const releaseOf = new Map<string, Hold>();
  const lockOf = (e: HistoryEvent & { lock: number }): Hold => holds.get(id(e.w, e.lock)) ?? fail(e, 'event for a lock that was never granted');

  for (const e of events) {
    stampOf(e);
    switch (e.ev) {
      case 'invoke': {
        const key = id(e.w, e.c);
        if (calls.has(key)) fail(e, 'call id used twice');
        calls.set(key, { invoke: e });
        if (e.op === 'release') {
          if (e.lock === undefined) fail(e, 'release without lock');
          releaseOf.set(key, lockOf(e as InvokeEvent & { lock: number }));
        }
        break;
      }
      case 'grant':
      case 'release':
      case 'error':
      case 'settle': {
        const call = calls.get(id(e.w, e.c)) ?? fail(e, 'completion without invoke');
        if (call.done) fail(e, `call already completed by ${JSON.stringify(call.done)}`);
        call.done = e;
        if (e.ev === 'grant') {
          if (call.invoke.op !== 'acquire') fail(e, 'grant of a call that is not an acquire');
          const parent = call.invoke.parent === undefined ? undefined : (holds.get(id(e.w, call.invoke.parent)) ?? fail(e, 'parent lock unknown'));
          const borrowed = parent !== undefined && Object.entries(e.fences).every(([k, f]) => parent.grant.fences[k] === f);
          holds.set(id(e.w, e.c), { w: e.w, lock: e.c, invoke: call.invoke, grant: e, from: stampOf(e), parent, borrowed });
        } else if (call.invoke.op === 'release') {
          const hold = releaseOf.get(id(e.w, e.c))!;
          if (e.ev === 'release' || e.ev === 'error') hold.release = e;
        }
        break;
      }
      case 'enter':
        lockOf(e).enter = e;
        break;
      case 'exit':
        lockOf(e).exit = e;
        break;
      case 'loss':
        lockOf(e).loss = e;
        break;
      case 'held': {
        const hold = lockOf(e);
        if (!e.ok) {
          hold.notHeld = e;
          break;
        }
        // A borrowing lock is held only while its outer lock is: its confirmation is the outer's too.
        const t = stampOf(e);
        for (let h: Hold | undefined = hold; h; h = h.borrowed ? h.parent : undefined) {
          if (h.to === undefined || t > h.to) {
            h.to = t;
            h.lastHeld = e;
          }
        }
        break;
      }
      default:
        fail(e, 'unknown event');
    }
  }
  return { calls: [...calls.values()], holds: [...holds.values()] };
}
