/**
 * `npm run demo`: the incident this library exists for, reproduced and fixed on real processes.
 *
 * Three instances of the sample app share one SQLite file and (in rounds 2-3) one Redis. Each round
 * creates a fresh campaign and fires every claim at once, round-robin over the instances:
 *   1. LOCK_MODE=in-process — each instance has its own mutex (the incident): oversells.
 *   2. @Locked — one lock in Redis for all instances.
 *   3. @Locked, with one instance frozen (SIGSTOP) inside a claim for longer than the lock TTL.
 *   4. @Locked + onBusy 'defer' — a busy claim answers 202 at once and runs later as a BullMQ job;
 *      the demo waits (bounded) for the queue to drain and audits every job.
 * Exit code 0 only if rounds 2-4 sold no more than the stock, gave nobody two coupons, the freeze of
 * round 3 really happened, and round 4 issued exactly the stock and lost no job. Ctrl-C stops everything it started.
 */
import 'reflect-metadata';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { RedisProcess, SharedRedis } from '../../test/harness/redis-process';
import { AppCluster } from './app-cluster';
import { Auditor } from './audit';
import { BurstShape, RoundResult, RoundSpec, runRound } from './demo-round';
import { silenceProgressBars } from './progress-bar';
import { CLAIM_QUEUE } from '../src/campaigns/campaign-lock-key';
import { judgeDeferred, judgeFreeze, resultsTable, roundDetails, tradeLine } from './report';

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isInteger(value) || value < 0) throw new Error(`${name} must be a non-negative integer; got "${raw}"`);
  return value;
}

const INSTANCES = 3;
const SHAPE: BurstShape = { stock: envInt('DEMO_STOCK', 100), claims: envInt('DEMO_CLAIMS', 600), users: envInt('DEMO_USERS', 250) };
const LOCK_TTL = envInt('DEMO_LOCK_TTL', 1_500);
const FREEZE_MS = envInt('DEMO_FREEZE_MS', 3 * LOCK_TTL);
const ROUND_MIN_MS = 4_000;
/** Round 4 fails if its queue has not drained this long after the burst. */
const DRAIN_TIMEOUT_MS = envInt('DEMO_DRAIN_TIMEOUT_MS', 60_000);

/** Everything started, stopped in reverse order exactly once: at the end, on an error, or on Ctrl-C. */
const cleanups: Array<() => Promise<unknown>> = [];
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const stop of cleanups.reverse()) await stop().catch((error) => console.error(`cleanup: ${(error as Error).message}`));
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    silenceProgressBars();
    console.log(`\n${signal}: stopping the app instances and redis-server the demo started...`);
    void cleanup().finally(() => process.exit(130));
  });
}

async function startCluster(lockMode: string, env: Record<string, string>): Promise<AppCluster> {
  const started = performance.now();
  const cluster = await AppCluster.start({ count: INSTANCES, env: { ...env, LOCK_MODE: lockMode } });
  cleanups.push(() => cluster.stop());
  const list = cluster.instances.map((i) => `${i.name} :${i.port} (pid ${i.worker.pid})`).join(', ');
  console.log(`  ${INSTANCES} instances, LOCK_MODE=${lockMode}: ${list} — up in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return cluster;
}

async function main(): Promise<number> {
  const started = performance.now();
  console.log(
    `Coupon demo: ${INSTANCES} instances, a stock of ${SHAPE.stock}, ${SHAPE.claims} concurrent claims from ${SHAPE.users} users per round, lock TTL ${LOCK_TTL} ms\n`,
  );
  const redis: SharedRedis = process.env.REDIS_URL ? await RedisProcess.external(process.env.REDIS_URL) : await RedisProcess.start();
  cleanups.push(() => redis.stop());
  console.log(`  redis-server ${redis.host}:${redis.port} (${redis.external ? 'REDIS_URL' : 'started for the demo'})`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coupon-demo-'));
  cleanups.push(async () => fs.rmSync(dir, { recursive: true, force: true }));
  const dbPath = path.join(dir, 'coupons.sqlite');
  console.log(`  SQLite ${dbPath} (shared by every instance)`);

  const env = {
    REDIS_URL: redis.url,
    DB_PATH: dbPath,
    LOCK_TTL: String(LOCK_TTL),
    CLAIM_WAIT_MS: '20000',
    SETTLE_CRON: '* * * * * *',
    DEBUG_HOOKS: '1',
    DB_LATENCY_MS: process.env.DB_LATENCY_MS ?? '1',
  };
  const runId = Date.now().toString(36);
  const round = (n: number, title: string, lock: string, extra: Partial<RoundSpec> = {}): RoundSpec => ({
    title,
    lock,
    campaignId: `spring-sale-${runId}-r${n}`,
    shape: SHAPE,
    minDurationMs: ROUND_MIN_MS,
    progress: true,
    ...extra,
  });
  const results: RoundResult[] = [];
  let auditor: Auditor | undefined;
  const play = async (cluster: AppCluster, spec: RoundSpec) => {
    console.log(`\nRound ${results.length + 1}: ${spec.title}`);
    auditor ??= new Auditor(dbPath);
    const result = await runRound(cluster, auditor, spec);
    results.push(result);
    console.log(roundDetails(result));
    if (spec.freeze) for (const line of judgeFreeze(result, LOCK_TTL).lines) console.log(line);
  };
  cleanups.push(async () => auditor?.close());

  console.log('\nStarting the incident setup: three instances, each with its own in-process lock');
  const incident = await startCluster('in-process', env);
  await play(incident, round(1, 'in-process lock only (the incident)', 'in-process mutex'));
  await incident.stop();

  console.log('\nRestarting the instances with the distributed lock');
  const fixed = await startCluster('distributed', env);
  await play(fixed, round(2, '@Locked (one lock in Redis for all instances)', '@Locked'));
  const freezeClaim = 1; // the second claim: early in the burst, to app-2
  await play(
    fixed,
    round(
      3,
      `@Locked, app-${(freezeClaim % INSTANCES) + 1} frozen (SIGSTOP) inside a claim for ${FREEZE_MS} ms > TTL ${LOCK_TTL} ms`,
      '@Locked + SIGSTOP',
      {
        freeze: { claim: freezeClaim, userId: 'user-frozen', freezeMs: FREEZE_MS },
      },
    ),
  );
  await play(
    fixed,
    round(4, "@Locked + onBusy 'defer': a busy claim answers 202 and runs later as a BullMQ job", '@Locked + defer', {
      defer: { redisUrl: redis.url, queueName: CLAIM_QUEUE, drainTimeoutMs: DRAIN_TIMEOUT_MS },
    }),
  );
  await fixed.stop();

  console.log(`\n${resultsTable(results)}\n`);
  const [r1, r2, r3, r4] = results;
  const clean = (r: RoundResult) => r.audit.oversold === 0 && r.audit.duplicateUsers === 0;
  const freeze = judgeFreeze(r3, LOCK_TTL);
  const deferred = judgeDeferred(r4);
  console.log(`${tradeLine(r2, r4)}\n`);
  if (r1.audit.oversold > 0 || r1.audit.duplicateUsers > 0) {
    console.log(
      `Round 1 reproduced the incident: ${r1.audit.coupons} coupons issued for a stock of ${r1.audit.stock} ` +
        `(${r1.audit.oversold} oversold), ${r1.audit.duplicateUsers} user(s) with two or more; the settlement job ran on up to ${r1.cron.maxInstances} instances per tick.`,
    );
  } else {
    console.log('Round 1 did NOT oversell: the burst was too gentle to show the incident on this machine (try DB_LATENCY_MS=5).');
  }
  const checks: [string, boolean][] = [
    ['round 2: 0 oversold, 0 users with 2+ coupons', clean(r2)],
    ['round 3: 0 oversold, 0 users with 2+ coupons', clean(r3)],
    ['round 3: the instance really was frozen inside a claim for longer than the TTL', freeze.verified],
    ["round 3: the frozen holder's stale write did not land", freeze.staleWriteRefused],
    [`round 4: exactly the stock issued (${r4.audit.coupons} / ${r4.audit.stock}), 0 users with 2+ coupons`, deferred.exact],
    [
      `round 4: the queue drained within ${DRAIN_TIMEOUT_MS / 1000} s and every 202's job completed with a recorded outcome (0 failed, 0 lost)`,
      deferred.noJobLost,
    ],
    ['round 4: coupons in the database = 201s answered at once + jobs that issued one', deferred.accounted],
  ];
  for (const [what, ok] of checks) console.log(`${ok ? 'PASS' : 'FAIL'}  ${what}`);
  console.log(`\nDone in ${((performance.now() - started) / 1000).toFixed(1)} s.`);
  return checks.every(([, ok]) => ok) ? 0 : 1;
}

main()
  .then(async (code) => {
    await cleanup();
    process.exitCode = code;
  })
  .catch(async (error: unknown) => {
    console.error(`\nDemo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
    await cleanup();
    process.exitCode = 1;
  });
