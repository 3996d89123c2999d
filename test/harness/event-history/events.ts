/**
 * The events a history worker records, one JSON line each (see worker-log.ts), Jepsen style: every
 * call is an `invoke` followed by exactly one completion (`grant`, `release`, `error` or `settle`),
 * and what happens under a granted lock (`enter`, `held`, `exit`, `loss`) names that lock.
 *
 * `t` is `process.hrtime.bigint()` as a decimal string: CLOCK_MONOTONIC, one clock for every process
 * on the host, so events of different workers (and the parent's fault windows) compare directly.
 * Ids are per worker: `c` numbers the calls of one worker process; a lock is named by the id of the
 * acquire call that granted it.
 */

export type Policy = 'retry' | 'throw' | 'fail-fast';

interface Stamped {
  /** Worker (process incarnation) name; unique within a run. */
  w: string;
  /** hrtime stamp, ns, decimal string. */
  t: string;
}

/** A call starts. `acquire` covers `acquire()` and `withLock()`'s acquisition alike. */
export interface InvokeEvent extends Stamped {
  ev: 'invoke';
  c: number;
  op: 'acquire' | 'release' | 'close';
  /** acquire: the keys as asked (the library sorts them). */
  keys?: string[];
  policy?: Policy;
  /** acquire: waitTimeout in ms (bounds a 'retry'). */
  wait?: number;
  /** acquire inside a withLock body on keys that body holds (reentrant): the outer lock's id. */
  parent?: number;
  /** release: the lock released. */
  lock?: number;
}

/** An acquire resolved with a lock: completes call `c`, which is from now on the lock's id. */
export interface GrantEvent extends Stamped {
  ev: 'grant';
  c: number;
  /** `lock.fencingTokens`, key → token. */
  fences: Record<string, number>;
}

/** The body under lock `lock` starts / ends. */
export interface BodyEvent extends Stamped {
  ev: 'enter' | 'exit';
  lock: number;
}

/**
 * `lock.isHeld()` was asked inside the body, right before exit; `t` is taken just BEFORE the call,
 * so when it answered true the lease was valid at `t` (valid from grant until a deadline that is
 * after the call). `ok: false` (the lease had ended) is recorded for the report only.
 */
export interface HeldEvent extends Stamped {
  ev: 'held';
  lock: number;
  ok: boolean;
}

/** `lock.signal` aborted with a LockLostError. */
export interface LossEvent extends Stamped {
  ev: 'loss';
  lock: number;
  reason: string;
}

/** A release resolved: completes call `c`; `ok` is its result (null: withLock released, result not visible). */
export interface ReleaseEvent extends Stamped {
  ev: 'release';
  c: number;
  ok: boolean | null;
}

/** A call rejected: completes call `c`. */
export interface ErrorEvent extends Stamped {
  ev: 'error';
  c: number;
  /** Constructor name of the error (LockTimeoutError, LockConnectionError, …). */
  type: string;
  message: string;
}

/** Any other completion: a fail-fast that found the key busy (`result: 'busy'`), a close. */
export interface SettleEvent extends Stamped {
  ev: 'settle';
  c: number;
  result: string;
}

export type HistoryEvent = InvokeEvent | GrantEvent | BodyEvent | HeldEvent | LossEvent | ReleaseEvent | ErrorEvent | SettleEvent;

export type Completion = GrantEvent | ReleaseEvent | ErrorEvent | SettleEvent;

export const isHistoryEvent = (line: unknown): line is HistoryEvent =>
  typeof line === 'object' && line !== null && typeof (line as { ev?: unknown }).ev === 'string';
