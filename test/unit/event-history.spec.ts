/**
 * The event-history checker on hand-made histories: each rule must catch its violation (with both
 * events in the report) and must not flag the legitimate cases next to it (unconfirmed holds,
 * reentrant borrowing, time a worker spent SIGSTOPped, calls cut by kill -9).
 */
import { checkEventHistory, formatViolations } from '../harness/event-history/check-history';
import type { HistoryEvent, InvokeEvent, Policy } from '../harness/event-history/events';
import { roleOf, strayKeys } from '../harness/event-history/stray-keys';

/** ms on the test's clock → an hrtime-style ns stamp. */
const ns = (ms: number): string => String(BigInt(Math.round(ms * 1000)) * 1000n);

interface HoldSpec {
  w: string;
  c: number;
  keys: string[];
  fences: Record<string, number>;
  invokeAt?: number;
  grantAt: number;
  /** A true isHeld() at this time; undefined: no check answered true. */
  heldAt?: number;
  notHeldAt?: number;
  exitAt?: number;
  releaseOk?: boolean | null;
  policy?: Policy;
  wait?: number;
  parent?: number;
}

/** Events of one acquire → body → release, in the order a worker writes them. */
function hold(s: HoldSpec): HistoryEvent[] {
  const { w, c } = s;
  const exitAt = s.exitAt ?? Math.max(s.heldAt ?? s.grantAt, s.notHeldAt ?? s.grantAt) + 0.01;
  const events: HistoryEvent[] = [
    {
      ev: 'invoke',
      w,
      c,
      op: 'acquire',
      keys: s.keys,
      policy: s.policy ?? 'retry',
      wait: s.wait ?? 1000,
      parent: s.parent,
      t: ns(s.invokeAt ?? s.grantAt - 1),
    },
    { ev: 'grant', w, c, fences: s.fences, t: ns(s.grantAt) },
    { ev: 'enter', w, lock: c, t: ns(s.grantAt + 0.001) },
  ];
  if (s.heldAt !== undefined) events.push({ ev: 'held', w, lock: c, ok: true, t: ns(s.heldAt) });
  if (s.notHeldAt !== undefined) events.push({ ev: 'held', w, lock: c, ok: false, t: ns(s.notHeldAt) });
  events.push({ ev: 'exit', w, lock: c, t: ns(exitAt) });
  events.push({ ev: 'invoke', w, c: c + 1, op: 'release', lock: c, t: ns(exitAt) });
  events.push({ ev: 'release', w, c: c + 1, ok: s.releaseOk ?? true, t: ns(exitAt + 0.5) });
  return events;
}

const BOUNDS = { commandTimeoutMs: 100, shutdownTimeoutMs: 500, slackMs: 20 };
const check = (events: HistoryEvent[], extra: { killed?: string[]; pauses?: Array<{ w: string; from: number; to: number }> } = {}) =>
  checkEventHistory(events, {
    bounds: BOUNDS,
    killed: new Set(extra.killed ?? []),
    pauses: (extra.pauses ?? []).map((p) => ({ w: p.w, from: BigInt(ns(p.from)), to: BigInt(ns(p.to)) })),
  });

describe('event history: holds', () => {
  it("sequential holds with increasing fences are clean, however the workers' lines interleave", () => {
    const events = [
      ...hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 10, heldAt: 20 }),
      ...hold({ w: 'w2', c: 1, keys: ['a'], fences: { a: 11 }, grantAt: 21, heldAt: 30 }),
      ...hold({ w: 'w1', c: 3, keys: ['a', 'b'], fences: { a: 12, b: 5 }, grantAt: 31, heldAt: 40 }),
    ];
    // Each worker's own lines keep their order (one pipe each); across workers any order.
    const r = check([...events.filter((e) => e.w === 'w2'), ...events.filter((e) => e.w === 'w1')]);
    expect(r.holdViolations).toEqual([]);
    expect(r.callViolations).toEqual([]);
    expect(r).toMatchObject({ sections: 3, confirmed: 3, nested: 0 });
  });

  it('two confirmed intervals on one key are an overlap, reported with both holds and their events', () => {
    const r = check([
      ...hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 10, heldAt: 50 }),
      ...hold({ w: 'w2', c: 1, keys: ['a'], fences: { a: 11 }, grantAt: 30, heldAt: 60 }),
    ]);
    expect(r.holdViolations.map((v) => [v.kind, v.key, v.a.w, v.b?.w])).toEqual([['overlap', 'a', 'w1', 'w2']]);
    const text = formatViolations(r);
    expect(text).toMatch(/overlap on "a"/);
    expect(text).toContain(`"t":"${ns(30)}"`); // w2's grant
    expect(text).toContain(`"t":"${ns(50)}"`); // w1's last confirmation
  });

  it('a multi-key lock that believes it holds "b" while another process does is caught, although its release returned false', () => {
    const r = check([
      ...hold({ w: 'w2', c: 1, keys: ['b'], fences: { b: 20 }, grantAt: 100, heldAt: 140 }),
      // Granted on evidence about "a": its fence for "b" is a's, and its release finds someone else's token.
      ...hold({ w: 'w1', c: 1, keys: ['a', 'b'], fences: { a: 30, b: 30 }, grantAt: 120, heldAt: 125, releaseOk: false }),
    ]);
    expect(r.holdViolations.filter((v) => v.kind === 'overlap').map((v) => [v.key, v.a.w, v.b?.w])).toEqual([['b', 'w2', 'w1']]);
  });

  it('a nested interval inside a long hold is caught even with other holds between them', () => {
    const r = check([
      ...hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 1 }, grantAt: 0, heldAt: 1000 }),
      ...hold({ w: 'w2', c: 1, keys: ['a'], fences: { a: 2 }, grantAt: 100, heldAt: 200 }),
      ...hold({ w: 'w3', c: 1, keys: ['a'], fences: { a: 3 }, grantAt: 300, heldAt: 400 }),
    ]);
    expect(r.holdViolations.filter((v) => v.kind === 'overlap').map((v) => [v.a.w, v.b?.w])).toEqual([
      ['w1', 'w2'],
      ['w1', 'w3'],
    ]);
  });

  it('a hold never confirmed by isHeld() is not placed in time: no overlap, no fence order', () => {
    const r = check([
      ...hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 10, heldAt: 50 }),
      // Stamped late (SIGSTOPped between grant and stamp), lease gone on waking: fence lower, inside w1's interval.
      ...hold({ w: 'w2', c: 1, keys: ['a'], fences: { a: 5 }, grantAt: 20, notHeldAt: 21, releaseOk: false }),
    ]);
    expect(r.holdViolations).toEqual([]);
    expect(r.confirmed).toBe(1);
  });

  it('fences must strictly increase in grant order among confirmed holds', () => {
    const r = check([
      ...hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 10, heldAt: 20 }),
      ...hold({ w: 'w2', c: 1, keys: ['a'], fences: { a: 9 }, grantAt: 30, heldAt: 40 }),
      ...hold({ w: 'w3', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 50, heldAt: 60 }),
      ...hold({ w: 'w4', c: 1, keys: ['a'], fences: { a: 11 }, grantAt: 70, heldAt: 80 }),
    ]);
    expect(r.holdViolations.map((v) => [v.kind, v.a.w, v.b?.w])).toEqual([
      ['fence-order', 'w1', 'w2'],
      ['fence-order', 'w1', 'w3'],
    ]);
  });

  it('fences are compared per key, and must be positive integers', () => {
    const r = check([
      ...hold({ w: 'w1', c: 1, keys: ['a', 'b'], fences: { a: 10, b: 100 }, grantAt: 10, heldAt: 20 }),
      ...hold({ w: 'w2', c: 1, keys: ['b'], fences: { b: 101 }, grantAt: 30, heldAt: 40 }),
      ...hold({ w: 'w3', c: 1, keys: ['a'], fences: { a: 11 }, grantAt: 50, heldAt: 60 }),
      ...hold({ w: 'w4', c: 1, keys: ['c'], fences: { c: 0 }, grantAt: 50, heldAt: 60 }),
    ]);
    expect(r.holdViolations.map((v) => [v.kind, v.key])).toEqual([['bad-fence', 'c']]);
  });

  it('a lock reporting fences for other keys than it was asked for is flagged', () => {
    const r = check(hold({ w: 'w1', c: 1, keys: ['a', 'b'], fences: { a: 1 }, grantAt: 10, heldAt: 20 }));
    expect(r.holdViolations.map((v) => v.kind)).toEqual(['grant-keys']);
  });

  it('reentrancy: a nested lock that borrowed the keys is not a second holder, and its confirmation extends the outer one', () => {
    const outer = hold({ w: 'w1', c: 1, keys: ['a', 'b'], fences: { a: 10, b: 20 }, grantAt: 10, notHeldAt: 90, exitAt: 91 });
    // The nested events belong inside the outer body: before its held check and exit.
    const nested = hold({ w: 'w1', c: 10, keys: ['b'], fences: { b: 20 }, grantAt: 20, heldAt: 70, parent: 1 });
    const events = [...outer.slice(0, 3), ...nested, ...outer.slice(3)];
    const clean = check(events);
    expect(clean.holdViolations).toEqual([]);
    expect(clean).toMatchObject({ sections: 1, nested: 1, confirmed: 2 });
    // w2 enters "a" at 60: the outer lock (confirmed through the nested check at 70) still held it.
    const r = check([...events, ...hold({ w: 'w2', c: 1, keys: ['a'], fences: { a: 11 }, grantAt: 60, heldAt: 100 })]);
    expect(r.holdViolations.map((v) => [v.kind, v.key, v.a.w, v.a.lock, v.b?.w])).toEqual([['overlap', 'a', 'w1', 1, 'w2']]);
  });

  it('a nested lock that took a key afresh (outer lease lost) is checked as a holder of its own', () => {
    const outer = hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 10, notHeldAt: 90 });
    const nested = hold({ w: 'w1', c: 10, keys: ['a'], fences: { a: 12 }, grantAt: 50, heldAt: 70, parent: 1 });
    const other = hold({ w: 'w2', c: 1, keys: ['a'], fences: { a: 11 }, grantAt: 30, heldAt: 60 });
    const r = check([...outer.slice(0, 3), ...nested, ...outer.slice(3), ...other]);
    expect(r.holdViolations.map((v) => [v.kind, v.a.w, v.b?.w, v.b?.lock])).toEqual([['overlap', 'w2', 'w1', 10]]);
  });
});

describe('event history: calls', () => {
  const acquire = (c: number, at: number, policy: Policy, wait = 50): InvokeEvent => ({
    ev: 'invoke',
    w: 'w1',
    c,
    op: 'acquire',
    keys: ['a'],
    policy,
    wait,
    t: ns(at),
  });

  it('each kind of call has its bound (+ slack); beyond it is late', () => {
    const r = check([
      acquire(1, 0, 'retry', 50),
      { ev: 'error', w: 'w1', c: 1, type: 'LockTimeoutError', message: 'waited', t: ns(169) }, // 50 + 100 + 20 = 170
      acquire(2, 0, 'retry', 50),
      { ev: 'error', w: 'w1', c: 2, type: 'LockTimeoutError', message: 'waited', t: ns(171) },
      acquire(3, 0, 'throw'),
      { ev: 'error', w: 'w1', c: 3, type: 'LockConnectionError', message: 'frozen', t: ns(125) },
      acquire(4, 0, 'fail-fast'),
      { ev: 'settle', w: 'w1', c: 4, result: 'busy', t: ns(119) },
      { ev: 'invoke', w: 'w1', c: 5, op: 'close', t: ns(0) },
      { ev: 'settle', w: 'w1', c: 5, result: 'closed', t: ns(519) },
    ]);
    expect(r.callViolations.map((v) => [v.kind, v.invoke.c])).toEqual([
      ['late', 2],
      ['late', 3],
    ]);
    expect(r.calls.maxOverrunMs['acquire:throw']).toBeCloseTo(25);
    expect(r.calls.errors).toEqual({ LockTimeoutError: 2, LockConnectionError: 1, busy: 1 });
  });

  it("time the worker spent SIGSTOPped is not counted; another worker's pause does not count for it", () => {
    const events: HistoryEvent[] = [acquire(1, 0, 'throw'), { ev: 'error', w: 'w1', c: 1, type: 'LockConnectionError', message: 'x', t: ns(2110) }];
    expect(check(events, { pauses: [{ w: 'w1', from: 50, to: 2050 }] }).callViolations).toEqual([]);
    expect(check(events, { pauses: [{ w: 'w1', from: 50, to: 2050 }] }).calls.maxPausedMs).toBe(2000);
    expect(check(events, { pauses: [{ w: 'w2', from: 50, to: 2050 }] }).callViolations.map((v) => v.kind)).toEqual(['late']);
  });

  it('a call without completion is unsettled, unless its worker was killed', () => {
    const events: HistoryEvent[] = [acquire(1, 0, 'retry')];
    expect(check(events).callViolations.map((v) => v.kind)).toEqual(['unsettled']);
    const killed = check(events, { killed: ['w1'] });
    expect(killed.callViolations).toEqual([]);
    expect(killed.calls.cut).toBe(1);
  });

  it('errors must fit the policy: busy only for throw / fail-fast, timeouts only when waiting', () => {
    const r = check([
      acquire(1, 0, 'retry'),
      { ev: 'error', w: 'w1', c: 1, type: 'LockBusyError', message: 'busy', t: ns(1) },
      acquire(2, 0, 'throw'),
      { ev: 'error', w: 'w1', c: 2, type: 'LockTimeoutError', message: 'waited', t: ns(1) },
      acquire(3, 0, 'throw'),
      { ev: 'settle', w: 'w1', c: 3, result: 'busy', t: ns(1) },
      acquire(4, 0, 'retry'),
      { ev: 'error', w: 'w1', c: 4, type: 'TypeError', message: 'x is undefined', t: ns(1) },
      acquire(5, 0, 'throw'),
      { ev: 'error', w: 'w1', c: 5, type: 'LockBusyError', message: 'busy', t: ns(1) },
    ]);
    expect(r.callViolations.map((v) => [v.kind, v.invoke.c])).toEqual([
      ['unexpected-error', 1],
      ['unexpected-error', 2],
      ['unexpected-error', 3],
      ['unexpected-error', 4],
    ]);
  });

  it('a nested acquire that finds keys busy while its outer lock held them all along is a reentrancy failure', () => {
    const outer = hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 10, heldAt: 200 });
    const nested: HistoryEvent[] = [
      { ev: 'invoke', w: 'w1', c: 10, op: 'acquire', keys: ['a'], policy: 'retry', wait: 50, parent: 1, t: ns(20) },
      { ev: 'error', w: 'w1', c: 10, type: 'LockTimeoutError', message: 'waited', t: ns(70) },
    ];
    const r = check([...outer.slice(0, 3), ...nested, ...outer.slice(3)]);
    expect(r.callViolations.map((v) => v.kind)).toEqual(['reentrancy']);
    // The same failure after the outer lease was lost is legitimate.
    const lost = hold({ w: 'w1', c: 1, keys: ['a'], fences: { a: 10 }, grantAt: 10, heldAt: 15, notHeldAt: 200 });
    expect(check([...lost.slice(0, 3), ...nested, ...lost.slice(3)]).callViolations).toEqual([]);
  });

  it('a history that breaks the recording rules throws instead of passing', () => {
    expect(() => check([{ ev: 'grant', w: 'w1', c: 1, fences: { a: 1 }, t: ns(1) }])).toThrow(/completion without invoke/);
    expect(() =>
      check([
        acquire(1, 0, 'throw'),
        { ev: 'settle', w: 'w1', c: 1, result: 'busy', t: ns(1) },
        { ev: 'settle', w: 'w1', c: 1, result: 'busy', t: ns(2) },
      ]),
    ).toThrow(/already completed/);
    expect(() => check([{ ev: 'held', w: 'w1', lock: 3, ok: true, t: ns(1) }])).toThrow(/never granted/);
    expect(() => check([{ ...acquire(1, 0, 'throw'), t: 'soon' }])).toThrow(/not an integer stamp/);
  });
});

describe('stray keys', () => {
  it('knows the lock layout, whatever the prefix', () => {
    expect(['p:{a}', 'p:{a}:f', 'p:{a}:q', 'p:{a}:w', 'p:other', 'q:{a}'].map((k) => roleOf('p:', k))).toEqual([
      'lock',
      'fence',
      'queue',
      'waiters',
      'unknown',
      'unknown',
    ]);
  });

  it('allows only fencing tokens that expire within the hour', () => {
    const found = [
      { key: 'p:{a}:f', pttl: 3_599_000 },
      { key: 'p:{b}:f', pttl: -1 },
      { key: 'p:{a}', pttl: 900 },
      { key: 'p:{a}:q', pttl: 500 },
      { key: 'p:{a}:w', pttl: 500 },
      { key: 'p:junk', pttl: -1 },
    ];
    expect(strayKeys('p:', found).map((k) => `${k.key}:${k.role}`)).toEqual([
      'p:{b}:f:fence',
      'p:{a}:lock',
      'p:{a}:q:queue',
      'p:{a}:w:waiters',
      'p:junk:unknown',
    ]);
  });
});
