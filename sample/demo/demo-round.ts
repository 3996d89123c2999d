import * as http from 'http';
import { setTimeout as sleep } from 'timers/promises';
import type { AppCluster } from './app-cluster';
import { Auditor, CampaignAudit, CronAudit } from './audit';
import { ClaimOutcome, runBurst } from './claim-burst';
import { awaitDeferredJobs, DeferredAudit } from './deferred-jobs';
import { FreezeEvidence, freezeDuringClaim } from './freeze-during-claim';
import { requestJson } from './http-json';
import { LockHealth, lockHealth, snapshotMetrics } from './lock-health';
import { CAMPAIGN_LOCK } from '../src/campaigns/campaign-lock-key';
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

export interface DeferPlan {
  redisUrl: string;
  queueName: string;
  drainTimeoutMs: number;
}

export interface RoundSpec {
  title: string;
  lock: string;
  campaignId: string;
  shape: BurstShape;
  freeze?: FreezePlan;
  /** Round 4: claims go to the deferring endpoint; the round waits (at most `drainTimeoutMs`) for the queue to drain. */
  defer?: DeferPlan;
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
  /** Round 4: what became of the deferred claims' jobs. */
  deferred?: DeferredAudit;
  /** When every claim had its final result, from the first claim sent: the last answer, or (round 4) the last job finished. */
  resultsMs: number;
  /** The claim lock's health over the round, read from every instance's GET /metrics (not from internals). */
  lockHealth: LockHealth;
}

/** Creates the campaign (fresh stock), fires the burst, optionally freezes one instance mid-claim, and audits the database. */
export async function runRound(cluster: AppCluster, auditor: Auditor, spec: RoundSpec): Promise<RoundResult> {
  const agent = new http.Agent({ keepAlive: false });
  try {
    await warmUp(cluster, agent, `${spec.campaignId}-warmup`);
    await createCampaign(agent, cluster.ports[0], spec.campaignId, spec.shape.stock);
  } finally {
    agent.destroy();
  }

  // Counters are cumulative per process: the round's numbers are the difference of two scrapes.
  const metricsBefore = await snapshotMetrics(cluster.ports);
  const startedAt = Date.now();
  const bar = spec.progress ? new ProgressBar('claims', spec.shape.claims) : undefined;
  const burstStartedAt = Date.now();
  const burstStart = performance.now();
  const burst = runBurst({
    ports: cluster.ports,
    campaignId: spec.campaignId,
    claims: spec.shape.claims,
    users: spec.shape.users,
    stall: spec.freeze && { index: spec.freeze.claim, userId: spec.freeze.userId },
    deferred: spec.defer !== undefined,
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

  let deferred: DeferredAudit | undefined;
  if (spec.defer) {
    const jobIds = outcomes.filter((o) => o.status === 202).map((o) => o.jobId ?? '(202 without a job id)');
    deferred = await awaitDeferredJobs(spec.defer.redisUrl, spec.defer.queueName, jobIds, burstStartedAt, spec.defer.drainTimeoutMs);
  }
  const resultsMs = deferred ? Math.max(burstMs, deferred.drainMs) : burstMs;

  const rest = spec.minDurationMs - (Date.now() - startedAt);
  if (rest > 0) await sleep(rest);
  const endedAt = Date.now();
  const health = lockHealth(metricsBefore, await snapshotMetrics(cluster.ports), CAMPAIGN_LOCK);

  const evidence = freezeResult.value;
  const freeze: FreezeReport | undefined = evidence && {
    ...evidence,
    stalledClaim: outcomes[spec.freeze!.claim],
    issuedByOthersMeanwhile: auditor.couponsByOthersBetween(spec.campaignId, evidence.instance, evidence.stoppedAt, evidence.continuedAt),
  };
  return {
    spec,
    outcomes,
    burstMs,
    deferred,
    resultsMs,
    audit: auditor.campaign(spec.campaignId),
    cron: auditor.cron(startedAt, endedAt),
    freeze,
    lockHealth: health,
  };
}

async function createCampaign(agent: http.Agent, port: number, campaignId: string, stock: number): Promise<void> {
  const created = await requestJson(agent, port, 'PUT', `/campaigns/${campaignId}`, { stock });
  if (created.status !== 200) throw new Error(`creating campaign ${campaignId} answered ${created.status}: ${JSON.stringify(created.body)}`);
}

/**
 * One claim per instance on a throw-away campaign first: an instance's first request pays for lazy
 * compilation and first connections, and a burst that meets one warm and two cold instances is
 * served mostly by the warm one — which hides the race the in-process round is about.
 */
async function warmUp(cluster: AppCluster, agent: http.Agent, campaignId: string): Promise<void> {
  await createCampaign(agent, cluster.ports[0], campaignId, cluster.ports.length);
  for (const [i, port] of cluster.ports.entries()) {
    const res = await requestJson(agent, port, 'POST', `/campaigns/${campaignId}/claims`, { userId: `warmup-${i}` });
    if (res.status !== 201) throw new Error(`warm-up claim on port ${port} answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
}
