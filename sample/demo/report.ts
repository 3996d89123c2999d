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
      'p50',
      'p99',
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
      ms(percentile(r.outcomes, 50)),
      ms(percentile(r.outcomes, 99)),
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
  const other = r.outcomes.filter((o) => ![201, 409, 410, 422].includes(o.status));
  const byInstance = Object.entries(r.audit.byInstance)
    .map(([name, n]) => `${name} ${n}`)
    .join(', ');
  return (
    `  answers: ${countStatus(r.outcomes, 201)} issued (201), ${countStatus(r.outcomes, 410)} sold out (410), ` +
    `${countStatus(r.outcomes, 422)} already had one (422), ${countStatus(r.outcomes, 409)} lock busy/lost (409)` +
    (other.length ? `, ${other.length} other (${[...new Set(other.map((o) => o.status || o.error))].join(', ')})` : '') +
    `\n  coupons by instance: ${byInstance || 'none'}; campaign counter says ${r.audit.counter}` +
    (r.audit.fenceRejections ? `; writes refused by the fence: ${r.audit.fenceRejections}` : '') +
    `; settlement job ran ${r.cron.runs} time(s)\n` +
    healthLine(r.lockHealth)
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
