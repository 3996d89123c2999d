import { countStatus, percentile } from './claim-burst';
import type { RoundResult } from './demo-round';
import type { LockHealth } from './lock-health';
import { renderTable } from './text-table';

const ms = (v: number) => `${Math.round(v)} ms`;

export function resultsTable(results: readonly RoundResult[]): string {
  return renderTable(
    [
      'Round',
      'Lock',
      'Claims sent',
      'Coupons issued',
      'Oversold',
      'Users with 2+',
      '409s',
      '202s',
      'p50',
      'p99',
      'Results after',
      'Cron ticks run',
      'Instances per tick',
      'Acquire failures',
      'Lock wait p50 / p99',
      'Release validation failures',
    ],
    results.map((r, i) => [
      i + 1,
      r.spec.lock,
      r.outcomes.length,
      `${r.audit.coupons} / ${r.audit.stock}`,
      r.audit.oversold,
      r.audit.duplicateUsers,
      countStatus(r.outcomes, 409),
      countStatus(r.outcomes, 202),
      ms(percentile(r.outcomes, 50)),
      ms(percentile(r.outcomes, 99)),
      r.deferred && !r.deferred.drained ? 'not drained' : ms(r.resultsMs),
      `${r.cron.ticksRun} of ${r.cron.expectedTicks}`,
      r.cron.minInstances === r.cron.maxInstances ? `${r.cron.maxInstances}` : `${r.cron.minInstances}-${r.cron.maxInstances}`,
      ...healthCells(r.lockHealth),
    ]),
  );
}

const seconds = (s: number) => (!Number.isFinite(s) ? '∞' : s >= 1 ? `${s.toFixed(2)} s` : `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms`);
const percent = (x: number) => `${(x * 100).toFixed(1)} %`;

function healthCells(h: LockHealth): string[] {
  if (h.attempts === 0) return ['n/a', 'n/a', 'n/a'];
  return [
    `${percent(h.failureRate)} (${h.failures}/${h.attempts})`,
    `≈${seconds(h.waitP50)} / ≈${seconds(h.waitP99)}`,
    String(h.releaseValidationFailures),
  ];
}

const breakdown = (h: LockHealth) =>
  h.failures === 0
    ? ''
    : `: ${Object.entries(h.failuresByOutcome)
        .map(([outcome, n]) => `${n} ${outcome}`)
        .join(', ')}`;

/** The three numbers of the claim lock, as read from the instances' /metrics. */
export function healthLine(h: LockHealth): string {
  const where = `lock "${h.lockName}" (GET /metrics of every instance, summed over the round)`;
  if (h.attempts === 0) return `  ${where}: no acquisitions (no distributed lock in this round)`;
  return (
    `  ${where}: acquire failure rate ${percent(h.failureRate)} (${h.failures} of ${h.attempts}${breakdown(h)}); ` +
    `waiting for the lock p50 ≈${seconds(h.waitP50)}, p99 ≈${seconds(h.waitP99)} (bucket ${seconds(h.waitP99Bucket[0])}-${seconds(h.waitP99Bucket[1])}), mean ${seconds(h.waitMean)}; ` +
    `release-validation failures ${h.releaseValidationFailures}` +
    (h.lost ? `; leases lost ${h.lost}` : '')
  );
}

/** One line per round with every answer class and who issued the coupons. */
export function roundDetails(r: RoundResult): string {
  const other = r.outcomes.filter((o) => ![201, 202, 409, 410, 422].includes(o.status));
  const byInstance = Object.entries(r.audit.byInstance)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
  return (
    `  answers: ${countStatus(r.outcomes, 201)} issued (201), ${countStatus(r.outcomes, 410)} sold out (410), ` +
    `${countStatus(r.outcomes, 422)} already had one (422), ${countStatus(r.outcomes, 409)} lock busy/lost (409)` +
    (r.spec.defer ? `, ${countStatus(r.outcomes, 202)} deferred (202)` : '') +
    (other.length ? `, ${other.length} other (${[...new Set(other.map((o) => o.status || o.error))].join(', ')})` : '') +
    `\n  coupons by instance: ${byInstance || 'none'}; campaign counter says ${r.audit.counter}` +
    (r.audit.fenceRejections ? `; writes refused by the fence: ${r.audit.fenceRejections}` : '') +
    `; settlement job ran ${r.cron.runs} time(s)\n` +
    (r.deferred ? `${deferredLine(r)}\n` : '') +
    healthLine(r.lockHealth)
  );
}

/** Round 4: what the queue did with the 202s. */
function deferredLine(r: RoundResult): string {
  const d = r.deferred!;
  const outcomes = Object.entries(d.outcomes)
    .map(([outcome, n]) => `${n} ${outcome}`)
    .join(', ');
  return (
    `  deferred jobs (read from BullMQ): ${d.jobs} job(s) for the 202s; ${d.completed} completed (${outcomes || 'none'}), ` +
    `${d.failed} failed, ${d.missing} lost, ${d.pending} still pending` +
    (d.retried ? `, ${d.retried} needed a second run` : '') +
    `; ${d.drained ? `queue drained ${seconds(d.drainMs / 1000)} after the first claim` : 'the queue did NOT drain in time'}` +
    d.failedReasons
      .slice(0, 5)
      .map((reason) => `\n    failed: ${reason}`)
      .join('')
  );
}

export interface DeferVerdict {
  /** Exactly the stock issued, nobody twice. */
  exact: boolean;
  /** Every 202's job completed with a recorded outcome; none failed, lost or still pending. */
  noJobLost: boolean;
  /** Coupons in the database = 201s answered at once + jobs that returned 'issued'. */
  accounted: boolean;
}

export function judgeDeferred(r: RoundResult): DeferVerdict {
  const d = r.deferred;
  if (!d) return { exact: false, noJobLost: false, accounted: false };
  const recorded = ['issued', 'sold-out', 'already-claimed'].reduce((n, o) => n + (d.outcomes[o] ?? 0), 0);
  return {
    exact: r.audit.coupons === r.audit.stock && r.audit.oversold === 0 && r.audit.duplicateUsers === 0,
    noJobLost: d.drained && d.failed === 0 && d.missing === 0 && d.completed === d.jobs && recorded === d.jobs,
    accounted: countStatus(r.outcomes, 201) + (d.outcomes.issued ?? 0) === r.audit.coupons,
  };
}

/** Round 2 against round 4: answers now and results later, against answers that are the results. */
export function tradeLine(waiting: RoundResult, deferring: RoundResult): string {
  const p = (r: RoundResult, q: number) => ms(percentile(r.outcomes, q));
  return (
    `The trade, measured: waiting (round 2) answered p50 ${p(waiting, 50)} / p99 ${p(waiting, 99)}, every answer final, the last one ` +
    `${seconds(waiting.resultsMs / 1000)} after the first claim; deferring (round 4) answered p50 ${p(deferring, 50)} / p99 ${p(deferring, 99)} ` +
    `(${countStatus(deferring.outcomes, 202)} of them 202 with a job id), and the last result landed ` +
    (deferring.deferred?.drained ? `${seconds(deferring.resultsMs / 1000)} after the first claim.` : 'never: the queue did not drain.')
  );
}

export interface FreezeVerdict {
  /** The pause really happened, inside a claim, for longer than the TTL. */
  verified: boolean;
  /** The fence refused the frozen holder's write after others had written (false if it was accepted). */
  staleWriteRefused: boolean;
  lines: string[];
}

export function judgeFreeze(r: RoundResult, ttlMs: number): FreezeVerdict {
  const f = r.freeze;
  if (!f) return { verified: false, staleWriteRefused: false, lines: ['  freeze: no freeze evidence'] };
  const verified = f.stoppedMs > ttlMs && f.frozenMsSeenByInstance > ttlMs && f.kernelSawStopped !== false;
  const answer = f.stalledClaim;
  const refused = answer.status === 409 && answer.reason === 'stale-fence';
  const exercised = f.issuedByOthersMeanwhile > 0;
  const lines = [
    `  freeze: ${f.instance} (pid ${f.pid}) SIGSTOPped inside a claim holding fencing token ${f.fence}, for ${f.stoppedMs} ms ` +
      `(lock TTL ${ttlMs} ms); kernel state ${f.kernelSawStopped === null ? 'not readable' : f.kernelSawStopped ? "'T' (stopped)" : 'NOT stopped'}; ` +
      `the instance's own timers saw a ${f.frozenMsSeenByInstance} ms gap; after SIGCONT it ${f.leaseHeldAfterThaw ? 'still believed it held the lease' : 'knew its lease was gone'}.`,
    `  while it was frozen, the other instances took the expired lock and issued ${f.issuedByOthersMeanwhile} coupon(s); ` +
      `its stale write then ${refused ? 'was refused by the fenced UPDATE (answer: 409 stale-fence)' : `answered ${answer.status}${answer.reason ? ` ${answer.reason}` : ''}`}.`,
    `  pause verified: ${verified ? 'yes' : 'NO'}${exercised ? `; fence exercised: ${refused ? 'yes, stale write refused' : 'NO: the stale write was not refused'}` : '; fence not exercised (nobody wrote during the freeze)'}`,
  ];
  return { verified, staleWriteRefused: refused || !exercised, lines };
}
