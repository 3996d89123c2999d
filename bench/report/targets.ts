import { bestPerRound, pairedRatio } from '../measure/paired-ratio';
import type { BenchResults } from './bench-results';
import { fmt, fmtMs, fmtRatioSpread, Table } from './format';
import { TODAY } from './today';

/** One target (issue 16, or an earlier issue's still kept), as measured in this run. */
export interface TargetCheck {
  target: string;
  measured: string;
  ratio: string;
  /** undefined: reported, not judged (e.g. commands per acquisition). */
  pass: boolean | undefined;
}

const OURS = 'ours';

/**
 * The targets as ratios within this one run. "Peer" means the libraries (redis-semaphore, redlock,
 * redlock-10ms); the raw floor and the perfect-handover floor are references, not peers. Speed and
 * CPU targets of (a) and (b) are judged on paired ratios — ours over the reference within the same
 * round, median over rounds — because the shared machine's speed drifts between rounds, not within
 * one. "No worse than today" compares with TODAY (today.ts).
 */
export function checkTargets(results: BenchResults): TargetCheck[] {
  const checks: TargetCheck[] = [];
  const peers = results.adapters.filter((a) => a.role === 'peer').map((a) => a.name);
  const floor = results.adapters.find((a) => a.role === 'floor')?.name;

  const seq = results.sequential;
  if (seq[OURS] && floor && seq[floor]) {
    const peerRounds = peers.filter((n) => seq[n]).map((n) => seq[n].usPerCycleRounds);
    if (peerRounds.length > 0) {
      const vsPeer = pairedRatio(seq[OURS].usPerCycleRounds, bestPerRound(peerRounds, Math.min));
      checks.push({
        target: '(a) µs per cycle ≤ best peer',
        measured: `paired per round vs that round's fastest peer ${fmtRatioSpread(vsPeer)} over ${vsPeer.ratios.length} rounds`,
        ratio: `${vsPeer.median.toFixed(2)}× (≤ 1.00)`,
        pass: vsPeer.median <= 1,
      });
    }
    const paired = pairedRatio(seq[OURS].usPerCycleRounds, seq[floor].usPerCycleRounds);
    checks.push({
      target: '(a) µs per cycle ≤ 1.1 × raw floor',
      measured:
        `paired per round ${fmtRatioSpread(paired)} over ${paired.ratios.length} rounds; ` +
        `median rounds ${fmt(seq[OURS].usPerCycle)} µs vs floor ${fmt(seq[floor].usPerCycle)} µs`,
      ratio: `${paired.median.toFixed(2)}× (≤ 1.10)`,
      pass: paired.median <= 1.1,
    });
    const cpu = pairedRatio(seq[OURS].cpuUsPerCycleRounds, seq[floor].cpuUsPerCycleRounds);
    checks.push({
      target: '(a) Redis CPU per cycle ≤ 1.3 × raw floor',
      measured: `paired per round ${fmtRatioSpread(cpu)}; all rounds ${fmt(seq[OURS].cpuUsPerCycle)} µs vs floor ${fmt(seq[floor].cpuUsPerCycle)} µs`,
      ratio: `${cpu.median.toFixed(2)}× (≤ 1.30)`,
      pass: cpu.median <= 1.3,
    });
    checks.push({
      target: '(a) Redis commands per cycle (reported)',
      measured: `${fmt(seq[OURS].commandsPerCycle, 1)} vs floor ${fmt(seq[floor].commandsPerCycle, 1)} (scripts' own commands included)`,
      ratio: `${(seq[OURS].commandsPerCycle / seq[floor].commandsPerCycle).toFixed(2)}×`,
      pass: undefined,
    });
    checks.push({
      target: '(a) 2 round trips per uncontended cycle (issue 5)',
      measured: `${fmt(seq[OURS].roundTripsPerCycle, 2)} round trips`,
      ratio: `${(seq[OURS].roundTripsPerCycle / 2).toFixed(2)}×`,
      pass: Math.abs(seq[OURS].roundTripsPerCycle - 2) < 0.005,
    });
  }

  const par = results.parallel;
  const bestParallel = best(peers, (n) => par[n]?.opsPerSec, Math.max);
  const peerParallelRounds = peers.filter((n) => par[n]).map((n) => par[n].opsPerSecRounds);
  if (par[OURS] && bestParallel) {
    const paired = pairedRatio(par[OURS].opsPerSecRounds, bestPerRound(peerParallelRounds, Math.max));
    checks.push({
      target: '(b) ops/s ≥ 1.1 × best peer',
      measured:
        `paired per round vs that round's best peer ${fmtRatioSpread(paired)} over ${paired.ratios.length} rounds; ` +
        `median rounds ${fmt(par[OURS].opsPerSec, 0)} vs ${bestParallel.name} ${fmt(bestParallel.value, 0)}`,
      ratio: `${paired.median.toFixed(2)}× (≥ 1.10)`,
      pass: paired.median >= 1.1,
    });
  }

  for (const run of results.contended) {
    const ours = run.byLib[OURS];
    if (!ours) continue;
    const c = `(c ${run.sectionMs} ms)`;
    if (run.sectionMs >= 20) {
      if (run.handoverFloor) {
        const paired = pairedRatio(ours.cpuUsPerAcqRepeats, run.handoverFloor.cpuUsPerAcqRepeats);
        checks.push({
          target: `${c} Redis CPU per acquisition ≤ 1.5 × perfect-handover floor`,
          measured:
            `paired per repeat ${fmtRatioSpread(paired)} over ${paired.ratios.length} repeats; ` +
            `all repeats ${fmt(ours.cpuUsPerAcq, 0)} µs vs floor ${fmt(run.handoverFloor.cpuUsPerAcq, 0)} µs`,
          ratio: `${paired.median.toFixed(2)}× (≤ 1.50)`,
          pass: paired.median <= 1.5,
        });
        checks.push({
          target: `${c} Redis commands per acquisition (reported)`,
          measured: `${fmt(ours.commandsPerAcq, 1)} vs floor ${fmt(run.handoverFloor.commandsPerAcq, 1)}; ${fmt(ours.roundTripsPerAcq, 2)} round trips`,
          ratio: `${(ours.commandsPerAcq / run.handoverFloor.commandsPerAcq).toFixed(2)}×`,
          pass: undefined,
        });
      }
      const today = TODAY.contended20;
      checks.push({
        target: `${c} wait p99 no worse than today (${today.waitP99Ms} ms)`,
        measured: `${fmtMs(ours.waitP99)} ms`,
        ratio: `${(ours.waitP99 / today.waitP99Ms).toFixed(2)}× (≤ 1.00)`,
        pass: ours.waitP99 <= today.waitP99Ms,
      });
      checks.push({
        target: `${c} handoff p50 no worse than today (${today.handoffP50Ms} ms)`,
        measured: `${fmtMs(ours.handoffP50)} ms`,
        ratio: `${(ours.handoffP50 / today.handoffP50Ms).toFixed(2)}× (≤ 1.00)`,
        pass: ours.handoffP50 <= today.handoffP50Ms,
      });
    } else {
      const bestRate = best(peers, (n) => run.byLib[n]?.acquisitionsPerSec, Math.max);
      const peerRepeats = peers.filter((n) => run.byLib[n]).map((n) => run.byLib[n].acquisitionsPerSecRepeats);
      if (bestRate) {
        const paired = pairedRatio(ours.acquisitionsPerSecRepeats, bestPerRound(peerRepeats, Math.max));
        checks.push({
          target: `${c} acquisitions/s ≥ best peer (issue 5)`,
          measured:
            `paired per repeat vs that repeat's best peer ${fmtRatioSpread(paired)} over ${paired.ratios.length} repeats; ` +
            `all repeats ${fmt(ours.acquisitionsPerSec)} vs ${bestRate.name} ${fmt(bestRate.value)}`,
          ratio: `${paired.median.toFixed(2)}× (≥ 1.00)`,
          pass: paired.median >= 1,
        });
      }
    }
  }

  const overlaps = totalOverlaps(results);
  checks.push({
    target: '0 overlaps everywhere (every library, every contended run)',
    measured: `${overlaps} overlaps`,
    ratio: '',
    pass: overlaps === 0,
  });

  const held = results.held[OURS];
  if (held) {
    const today = TODAY.held;
    checks.push({
      target: `(d) Redis CPU per lease renewal no worse than today (${today.cpuUsPerRenewal} µs)`,
      measured: `${fmt(held.cpuUsPerRenewal)} µs`,
      ratio: `${(held.cpuUsPerRenewal / today.cpuUsPerRenewal).toFixed(2)}× (≤ 1.00)`,
      pass: held.cpuUsPerRenewal <= today.cpuUsPerRenewal,
    });
    checks.push({
      target: `(d) event-loop delay p99 no worse than today (${today.eventLoopDelayP99Ms} ms)`,
      measured: `${fmtMs(held.eventLoopDelayP99Ms)} ms`,
      ratio: `${(held.eventLoopDelayP99Ms / today.eventLoopDelayP99Ms).toFixed(2)}× (≤ 1.00)`,
      pass: held.eventLoopDelayP99Ms <= today.eventLoopDelayP99Ms,
    });
    // Our watchdog sends a tick's renewals as pipelines of at most 500, written back to back (each in
    // its own event-loop turn) and never waiting for one another's replies: the tick waits one round
    // trip, so "one round trip per tick" holds iff every renewal travelled in a pipeline.
    checks.push({
      target: '(d) one round trip per renewal tick per connection, not per lock (issue 5)',
      measured:
        `${held.singleCommands} single renewals; ${held.pipelines} pipelines sent back to back ` +
        `(${fmt(held.renewalsPerRoundTrip, 0)} renewals each), ${fmt(held.roundTripsPerRound, 2)} per round of ${held.locks} leases`,
      ratio: `${fmt(held.roundTripsPerRound / held.locks, 5)} round trips per lease-renewal`,
      pass: held.singleCommands === 0 && held.pipelines > 0,
    });
  }
  return checks;
}

export function totalOverlaps(results: BenchResults): number {
  let n = 0;
  for (const run of results.contended) for (const r of Object.values(run.byLib)) n += r.overlaps;
  return n;
}

export function targetsTable(checks: readonly TargetCheck[]): Table {
  return [
    ['target', 'measured', 'ratio', 'result'],
    ...checks.map((c) => [c.target, c.measured, c.ratio, c.pass === undefined ? 'info' : c.pass ? 'PASS' : 'FAIL']),
  ];
}

function best(names: string[], value: (name: string) => number | undefined, pick: (...v: number[]) => number) {
  const present = names
    .map((name) => ({ name, value: value(name) }))
    .filter((e): e is { name: string; value: number } => e.value !== undefined && !Number.isNaN(e.value));
  if (present.length === 0) return undefined;
  const target = pick(...present.map((e) => e.value));
  return present.find((e) => e.value === target);
}
