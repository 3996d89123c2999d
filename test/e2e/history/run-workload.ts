/**
 * One T12/T15 run: a fresh Redis (persistent when the workload restarts it), the proxy when the
 * workload has jitter, the workers, the faults at their share of progress, then quiescence and the
 * checks: the event history (check-history.ts) and the keys left under the run's prefix.
 */
import { randomBytes } from 'crypto';
import type { PauseWindow } from '../../harness/event-history/check-calls';
import { checkEventHistory, HistoryCheck } from '../../harness/event-history/check-history';
import { HistoryEvent, isHistoryEvent } from '../../harness/event-history/events';
import { scanPrefix, StrayKey, strayKeys } from '../../harness/event-history/stray-keys';
import { RedisProcess } from '../../harness/redis-process';
import { ProxyStats, TcpProxy } from '../../harness/tcp-proxy';
import { hrMs, sleep } from '../workers/support/timing';
import { Crew, Member } from './crew';
import { FaultRecord, killWorker, restartRedis, stopRedis, stopWorker, withClient } from './faults';
import { FaultPlan, pauseMs, Workload, workerPlans } from './workload';

export interface RunOptions {
  /** Top-level sections the run does in total (split over the workers). */
  sections: number;
  /** A run still going after this long is stopped: its workers hung. */
  timeCapMs: number;
  /** Timer lateness and scheduling allowed on top of every call's bound (measured; see the specs). */
  slackMs: number;
  /** Extra delay of pub/sub messages (proxy only). */
  subscriberDelayMs?: number;
  /** Negative control: the workers take no lock at all. */
  bypass?: boolean;
}

export interface WorkerSummary {
  name: string;
  pid: number;
  killed: boolean;
  hung: boolean;
  exit?: { code: number | null; signal: string | null };
  sections: number;
  done?: Member['done'];
  stderr: string;
}

export interface RunReport {
  runId: string;
  workload: Workload;
  check: HistoryCheck;
  stray: StrayKey[];
  faults: FaultRecord[];
  proxy?: ProxyStats;
  /** From go to the last worker's exit. */
  ms: number;
  workers: WorkerSummary[];
  /** LockConnectionError completions / calls. */
  connectionErrorShare: number;
  /** Redis was stopped or restarted in this run (connection errors are expected then). */
  redisFaulted: boolean;
  /** Every worker's events, in each worker's order (for saveHistory on failure). */
  events: HistoryEvent[];
}

/** Poll period of the fault scheduler and the completion wait. */
const TICK_MS = 20;
/** After the waits the layout documents, for Redis' expiry and our own timers. */
const QUIESCENCE_MARGIN_MS = 300;

export async function runWorkload(w: Workload, opts: RunOptions): Promise<RunReport> {
  const runId = `h${randomBytes(4).toString('hex')}`;
  const redis = await RedisProcess.start({ persistent: w.faults.some((f) => f.kind === 'restart-redis') });
  let proxy: TcpProxy | undefined;
  const crew = new Crew();
  try {
    if (w.jitterMs > 0 || opts.subscriberDelayMs) {
      proxy = await TcpProxy.start(redis.port);
      proxy.setJitter(w.jitterMs);
      proxy.setSubscriberDelay(opts.subscriberDelayMs ?? 0);
    }
    const plans = workerPlans(w, { runId, url: proxy?.url ?? redis.url, sections: opts.sections, bypass: opts.bypass });
    await Promise.all(plans.map((p) => crew.start(p)));
    const started = hrMs();
    await crew.go();

    const faults: FaultRecord[] = [];
    const pauses: PauseWindow[] = [];
    const faultsDone = (async () => {
      for (const f of w.faults) {
        while (crew.progress() < f.atProgress * opts.sections && crew.running().length > 0) await sleep(TICK_MS);
        faults.push(await inject(f, { w, redis, crew, pauses, runId }));
      }
    })();

    while (!crew.allExited() && hrMs() - started < opts.timeCapMs) await sleep(TICK_MS);
    const ms = hrMs() - started;
    for (const m of crew.members.filter((m) => !m.exited)) {
      m.hung = true;
      await m.handle.kill9();
    }
    await faultsDone;
    crew.progress();

    // Quiescence: a killed holder's lease runs out within ttl; queue and waiter keys 2 × waiterLease after their last refresh.
    await sleep(Math.max(w.ttl, 2 * w.waiterLease) + QUIESCENCE_MARGIN_MS);
    const stray = strayKeys(`${runId}:`, await withClient(redis, (c) => scanPrefix(c, `${runId}:`)));

    const events = crew.members.flatMap((m) => m.handle.lines.filter(isHistoryEvent));
    const check = checkEventHistory(events, {
      bounds: { commandTimeoutMs: w.commandTimeout, shutdownTimeoutMs: w.shutdownTimeout, slackMs: opts.slackMs },
      pauses,
      killed: new Set(crew.members.filter((m) => m.killed).map((m) => m.plan.worker)),
    });
    const workers = await Promise.all(
      crew.members.map(async (m) => ({
        name: m.plan.worker,
        pid: m.handle.pid,
        killed: m.killed,
        hung: m.hung,
        exit: await m.handle.exited,
        sections: m.sections,
        done: m.done,
        stderr: m.handle.stderrText.slice(-2_000),
      })),
    );
    return {
      runId,
      workload: w,
      check,
      stray,
      faults,
      proxy: proxy?.stats(),
      ms,
      workers,
      connectionErrorShare: (check.calls.errors.LockConnectionError ?? 0) / Math.max(1, check.calls.calls),
      redisFaulted: w.faults.some((f) => f.kind === 'stop-redis' || f.kind === 'restart-redis'),
      events,
    };
  } finally {
    await crew.stopAll();
    await proxy?.stop();
    await redis.stop();
  }
}

interface FaultContext {
  w: Workload;
  redis: RedisProcess;
  crew: Crew;
  pauses: PauseWindow[];
  runId: string;
}

/** A worker with most of its quota left (so it is still running when the fault lands). */
function pickTarget(crew: Crew, target: number): Member | undefined {
  const live = crew.running().filter((m) => m.sections < 0.9 * m.plan.sections);
  return live.length > 0 ? live[target % live.length] : undefined;
}

async function inject(f: FaultPlan, ctx: FaultContext): Promise<FaultRecord> {
  const now = String(process.hrtime.bigint());
  const none = (why: string): FaultRecord => ({ kind: f.kind, from: now, to: now, happened: false, evidence: why });
  if (ctx.crew.running().length === 0) return none(`the run ended before ${Math.round(f.atProgress * 100)} % progress`);
  switch (f.kind) {
    case 'stop-worker': {
      const m = pickTarget(ctx.crew, f.target);
      if (!m) return none('no running worker to stop');
      const { record, pause } = await stopWorker(m.handle, m.plan.worker, pauseMs(f, ctx.w.ttl));
      ctx.pauses.push(pause);
      return record;
    }
    case 'kill-worker': {
      const m = pickTarget(ctx.crew, f.target);
      if (!m) return none('no running worker to kill');
      m.killed = true;
      const record = await killWorker(m.handle, m.plan.worker);
      ctx.crew.progress();
      // The instance restarts: a new process (new service, new tokens) does the rest of the quota.
      const rest = m.plan.sections - m.sections;
      if (rest > 0) {
        const replacement = await ctx.crew.start({ ...m.plan, worker: `${m.plan.worker}r`, seed: m.plan.seed + 1, sections: rest, closeAt: [] });
        await ctx.crew.go([replacement]);
        record.evidence += `; replaced by ${replacement.plan.worker} for ${rest} sections`;
      }
      return record;
    }
    case 'stop-redis':
      return stopRedis(ctx.redis, pauseMs(f, ctx.w.ttl));
    case 'restart-redis':
      return restartRedis(ctx.redis, f.crash, `marker:${ctx.runId}`);
  }
}
