import * as http from 'http';
import { setTimeout as sleep } from 'timers/promises';
import type { AppCluster } from './app-cluster';
import { Auditor, CampaignAudit, CronAudit } from './audit';
import { ClaimOutcome, runBurst } from './claim-burst';
import { FreezeEvidence, freezeDuringClaim } from './freeze-during-claim';
import { requestJson } from './http-json';
import { ProgressBar } from './progress-bar';

export interface BurstShape {
  stock: number;
  claims: number;
  users: number;
}

export interface FreezePlan {
  /** Which claim carries the stall header; it goes to instance `claim % instances`. */
  claim: number;
  /** Its user (one with no other claim). */
  userId: string;
  freezeMs: number;
}

export interface RoundSpec {
  title: string;
  lock: string;
  campaignId: string;
  shape: BurstShape;
  freeze?: FreezePlan;
  /** Keep the round open at least this long, so the 1-second cron ticks a few times. */
  minDurationMs: number;
  /** Draw a progress bar (the demo) or stay quiet (tests). */
  progress: boolean;
}

export interface FreezeReport extends FreezeEvidence {
  /** The answer to the frozen claim. */
  stalledClaim: ClaimOutcome;
  /** Coupons other instances issued while it was frozen (they had the lock: its lease had expired). */
  issuedByOthersMeanwhile: number;
}

export interface RoundResult {
  spec: RoundSpec;
  outcomes: ClaimOutcome[];
  burstMs: number;
  audit: CampaignAudit;
  cron: CronAudit;
  freeze?: FreezeReport;
}

/** Creates the campaign (fresh stock), fires the burst, optionally freezes one instance mid-claim, and audits the database. */
export async function runRound(cluster: AppCluster, auditor: Auditor, spec: RoundSpec): Promise<RoundResult> {
  const agent = new http.Agent({ keepAlive: false });
  try {
    const created = await requestJson(agent, cluster.ports[0], 'PUT', `/campaigns/${spec.campaignId}`, { stock: spec.shape.stock });
    if (created.status !== 200) throw new Error(`creating campaign ${spec.campaignId} answered ${created.status}: ${JSON.stringify(created.body)}`);
  } finally {
    agent.destroy();
  }

  const startedAt = Date.now();
  const bar = spec.progress ? new ProgressBar('claims', spec.shape.claims) : undefined;
  const burstStart = performance.now();
  const burst = runBurst({
    ports: cluster.ports,
    campaignId: spec.campaignId,
    claims: spec.shape.claims,
    users: spec.shape.users,
    stall: spec.freeze && { index: spec.freeze.claim, userId: spec.freeze.userId },
    onSettled: () => bar?.tick(),
  });
  const target = spec.freeze && cluster.instances[spec.freeze.claim % cluster.instances.length];
  const freezing = target ? freezeDuringClaim(target, spec.freeze!.freezeMs, 30_000) : Promise.resolve(undefined);
  // Both settle before either's failure is reported, so no request or signal is left in flight.
  const [burstResult, freezeResult] = await Promise.allSettled([burst, freezing]);
  const burstMs = performance.now() - burstStart;
  if (burstResult.status === 'rejected') throw burstResult.reason;
  if (freezeResult.status === 'rejected') throw freezeResult.reason;
  const outcomes = burstResult.value;
  bar?.finish(`${(burstMs / 1000).toFixed(1)} s`);

  const rest = spec.minDurationMs - (Date.now() - startedAt);
  if (rest > 0) await sleep(rest);
  const endedAt = Date.now();

  const evidence = freezeResult.value;
  const freeze: FreezeReport | undefined = evidence && {
    ...evidence,
    stalledClaim: outcomes[spec.freeze!.claim],
    issuedByOthersMeanwhile: auditor.couponsByOthersBetween(spec.campaignId, evidence.instance, evidence.stoppedAt, evidence.continuedAt),
  };
  return { spec, outcomes, burstMs, audit: auditor.campaign(spec.campaignId), cron: auditor.cron(startedAt, endedAt), freeze };
}
