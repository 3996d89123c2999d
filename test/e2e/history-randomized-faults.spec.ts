/**
 * T15 — the history checker under randomized workloads and faults. Several processes (each its own
 * LockService, one key prefix per run) take overlapping key sets with every policy, nested
 * reentrant withLock calls, waits that expire in the queue and close() mid-hold, while the run
 * injects faults at random points of its progress: a worker killed with kill -9 (and replaced, as a
 * restarted instance would be), a worker SIGSTOPped past its TTL then continued, Redis SIGSTOPped
 * 1–3 s, Redis restarted (AOF with fsync always, so what it acknowledged survives; a restart without
 * persistence loses locks by design and is not in this test). Every fault proves it happened.
 *
 * Checked on the recorded event history (test/harness/event-history): 0 overlaps of confirmed holds,
 * fences strictly increasing per key in grant order, every call settled within its bound (time a
 * worker was SIGSTOPped not counted) with an error its policy allows, no stray keys after
 * quiescence; on runs where Redis stayed healthy, LockConnectionError < 1 % of calls.
 *
 * Workloads are drawn with fast-check from the printed seed; `SEED=<n>` replays them.
 * CI: one run per fault kind (other faults may join), 8,000 sections each, workers talking to Redis
 * directly (the jittery proxy is T12's, and costs 3× the time). SOAK=1: 40 runs of 25,000 sections
 * with any mix of faults, through the proxy or not (1,000,000 sections).
 */
import { killSurvivors } from '../harness/worker-process';
import { runWorkload } from './history/run-workload';
import { expectCleanRun, runSummary } from './history/run-verdict';
import { SLACK_MS, SOAK, Tally } from './history/spec-support';
import { drawSeed, drawWorkloads, FaultKind, randomizedFaultsArb, Workload } from './history/workload';

const KINDS: FaultKind[] = ['kill-worker', 'stop-worker', 'stop-redis', 'restart-redis'];
const SECTIONS = SOAK ? 25_000 : 8_000;
const TIME_CAP_MS = SOAK ? 10 * 60_000 : 60_000;
const SEED = drawSeed();

function ciWorkloads(): Workload[] {
  return KINDS.map((kind, i) => ({ ...drawWorkloads(randomizedFaultsArb(kind), SEED + i, 1)[0], jitterMs: 0 }));
}

const workloads = SOAK ? drawWorkloads(randomizedFaultsArb(), SEED, 40) : ciWorkloads();

const describeWorkload = (w: Workload): string =>
  `${w.faults.map((f) => f.kind).join(' + ') || 'no fault'}; ${w.workers} processes × ${w.lanes} lanes, ` +
  `${w.jitterMs ? `proxy ${w.jitterMs} ms jitter` : 'direct'}, ${w.closes.length} close() mid-hold, waiterLease ${w.waiterLease} ms`;

describe(`T15 randomized workloads and faults (SEED=${SEED})`, () => {
  const tally = new Tally();

  beforeAll(() => console.log(`T15 SEED=${SEED} (replay: SEED=${SEED} npx jest test/e2e/history-randomized-faults.spec.ts --runInBand)`));
  afterAll(() => console.log(tally.line('T15 total', SEED)));
  afterAll(() => expect(killSurvivors()).toEqual([]));

  workloads.forEach((w, i) => {
    const name = `run ${i + 1}/${workloads.length}: ${describeWorkload(w)}`;
    it(
      name,
      async () => {
        const report = await runWorkload(w, { sections: SECTIONS, timeCapMs: TIME_CAP_MS, slackMs: SLACK_MS });
        tally.add(report);
        console.log(runSummary(`T15 ${name}`, report));
        expectCleanRun(report, SECTIONS, `SEED=${SEED} npx jest test/e2e/history-randomized-faults.spec.ts --runInBand -t 'run ${i + 1}/'`);
      },
      TIME_CAP_MS + 30_000,
    );
  });
});
