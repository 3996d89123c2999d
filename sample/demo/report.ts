import { countStatus, percentile } from './claim-burst';
import type { RoundResult } from './demo-round';
import { renderTable } from './text-table';

const ms = (v: number) => `${Math.round(v)} ms`;

export function resultsTable(results: readonly RoundResult[]): string {
  return renderTable(
    ['Round', 'Lock', 'Claims sent', 'Coupons issued', 'Oversold', 'Users with 2+', '409s', 'p50', 'p99', 'Cron ticks run', 'Instances per tick'],
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
    ]),
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
    `; settlement job ran ${r.cron.runs} time(s)`
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
