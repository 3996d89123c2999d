/**
 * T12 — multi-key locks under reordering. Four processes, each with its own LockService connected
 * through one TCP proxy that delays every chunk by a random 0–15 ms, drawn per connection and
 * direction: a client's command replies and its pub/sub handover messages (two connections) reach it
 * reordered relative to each other. The processes take overlapping key sets (['a','b'], ['b','c'],
 * ['c','a'] in several rings of hot keys, plus single hot and cold keys) with every policy, waits
 * that expire in the queue, nested reentrant withLock calls, and a short waiterLease (200–500 ms).
 *
 * Checked on the recorded event history (test/harness/event-history): 0 overlaps of confirmed holds,
 * fences strictly increasing per key, every call settled within its bound, no stray keys, and
 * LockConnectionError < 1 % of calls (Redis is healthy here). The proxy must really have delayed and
 * reordered the traffic. The negative control runs the same workload with no lock at all: the
 * checker must report overlaps and fence inversions, so it provably can fail.
 *
 * Workloads are drawn with fast-check from the printed seed; `SEED=<n>` replays them.
 * CI: 1 run of 20,000 sections. SOAK=1: 10 runs of 20,000.
 */
import { killSurvivors } from '../harness/worker-process';
import { runWorkload } from './history/run-workload';
import { expectCleanRun, runSummary } from './history/run-verdict';
import { SLACK_MS, SOAK, Tally } from './history/spec-support';
import { drawSeed, drawWorkloads, multiKeyReorderingArb } from './history/workload';

const RUNS = SOAK ? 10 : 1;
const SECTIONS = 20_000;
const TIME_CAP_MS = SOAK ? 10 * 60_000 : 100_000;
const SEED = drawSeed();
const workloads = drawWorkloads(multiKeyReorderingArb, SEED, RUNS);

describe(`T12 multi-key locks under reordering (SEED=${SEED})`, () => {
  const tally = new Tally();

  beforeAll(() => console.log(`T12 SEED=${SEED} (replay: SEED=${SEED} npx jest test/e2e/history-multikey-reordering.spec.ts --runInBand)`));
  afterAll(() => console.log(tally.line('T12 total', SEED)));
  afterAll(() => expect(killSurvivors()).toEqual([]));

  workloads.forEach((w, i) => {
    const name = `run ${i + 1}/${RUNS}: ${w.workers} processes × ${w.lanes} lanes, ${w.rings} rings + ${w.coldKeys} cold keys, ${Math.round(w.multiShare * 100)} % multi-key, waiterLease ${w.waiterLease} ms`;
    it(
      name,
      async () => {
        const report = await runWorkload(w, { sections: SECTIONS, timeCapMs: TIME_CAP_MS, slackMs: SLACK_MS });
        tally.add(report);
        console.log(runSummary(`T12 ${name}`, report));
        expectCleanRun(report, SECTIONS, `SEED=${SEED} npx jest test/e2e/history-multikey-reordering.spec.ts --runInBand -t 'run ${i + 1}/'`);
      },
      TIME_CAP_MS + 30_000,
    );
  });

  it('negative control: the same workload with the lock bypassed shows overlaps and fence inversions', async () => {
    const report = await runWorkload({ ...workloads[0], jitterMs: 0 }, { sections: 2_000, timeCapMs: 30_000, slackMs: SLACK_MS, bypass: true });
    const overlaps = report.check.holdViolations.filter((v) => v.kind === 'overlap').length;
    const inversions = report.check.holdViolations.filter((v) => v.kind === 'fence-order').length;
    console.log(`T12 negative control (no lock): ${report.check.sections} sections, overlaps ${overlaps}, fence inversions ${inversions}`);
    expect(report.check.sections).toBeGreaterThanOrEqual(2_000);
    expect(overlaps).toBeGreaterThan(0);
    expect(inversions).toBeGreaterThan(0);
  }, 60_000);
});
