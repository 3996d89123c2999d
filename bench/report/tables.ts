import type { LockAdapter } from '../adapters';
import type { HandoverFloorResult } from '../measure/handover-floor';
import { pairedRatio } from '../measure/paired-ratio';
import { fmt, fmtMs, fmtPct, fmtRatioSpread, Table } from './format';
import type { BenchResults } from './bench-results';
import { oursShareLine } from './share-line';

type Row<T> = [label: string, cell: (r: T) => string];

function sideBySide<T>(
  results: BenchResults,
  byLib: Record<string, T | undefined>,
  rows: Row<T>[],
  adapters: readonly LockAdapter[] = results.adapters,
): Table {
  const names = adapters.map((a) => a.name).filter((n) => byLib[n] !== undefined);
  return [['', ...names], ...rows.map(([label, cell]) => [label, ...names.map((n) => cell(byLib[n] as T))])];
}

/** (a)'s columns: ours, then the parts of ours measured alone, then the peers and the floor. */
function sequentialColumns(results: BenchResults): LockAdapter[] {
  const ours = results.adapters.filter((a) => a.role === 'ours');
  return [...ours, ...results.diagnostics, ...results.adapters.filter((a) => a.role !== 'ours')];
}

export function sequentialTable(results: BenchResults): Table {
  const floor = results.adapters.find((a) => a.role === 'floor')?.name;
  const floorRounds = floor ? results.sequential[floor]?.usPerCycleRounds : undefined;
  return sideBySide(
    results,
    results.sequential,
    [
      ['µs per cycle (median round)', (r) => fmt(r.usPerCycle)],
      ['µs per cycle, rounds min–max', (r) => `${fmt(Math.min(...r.usPerCycleRounds), 0)}–${fmt(Math.max(...r.usPerCycleRounds), 0)}`],
      [
        '÷ raw floor, paired per round: median (min–max)',
        (r) => (floorRounds ? fmtRatioSpread(pairedRatio(r.usPerCycleRounds, floorRounds)) : 'n/a'),
      ],
      ['round trips per cycle', (r) => fmt(r.roundTripsPerCycle, 2)],
      ['Redis commands per cycle', (r) => fmt(r.commandsPerCycle, 1)],
      ['Redis CPU µs per cycle', (r) => fmt(r.cpuUsPerCycle)],
      ['client CPU µs per cycle', (r) => fmt(r.clientCpuUsPerCycle)],
    ],
    sequentialColumns(results),
  );
}

/**
 * Where ours' uncontended time goes, from (a)'s rounds paired: the library's client code (ours ÷ its scripts sent
 * alone) and the server's scripts (its scripts alone ÷ the raw floor). Undefined when (a) ran without the diagnostic.
 */
export function sequentialShareLine(results: BenchResults): string | undefined {
  const ours = results.adapters.find((a) => a.role === 'ours')?.name;
  const floor = results.adapters.find((a) => a.role === 'floor')?.name;
  const scripts = results.diagnostics[0]?.name;
  if (!ours || !floor || !scripts || [ours, floor, scripts].some((n) => !results.sequential[n])) return undefined;
  return oursShareLine("Where ours' time goes", results.sequential, { ours, scripts, reference: floor });
}

export function parallelTable(results: BenchResults): Table {
  return sideBySide(results, results.parallel, [
    ['ops/s (median round)', (r) => fmt(r.opsPerSec, 0)],
    ['ops/s, rounds min–max', (r) => `${fmt(Math.min(...r.opsPerSecRounds), 0)}–${fmt(Math.max(...r.opsPerSecRounds), 0)}`],
    ['round trips per op', (r) => fmt(r.roundTripsPerOp, 2)],
    ['Redis commands per op', (r) => fmt(r.commandsPerOp, 1)],
    ['Redis CPU µs per op', (r) => fmt(r.cpuUsPerOp)],
    ['client CPU µs per op', (r) => fmt(r.clientCpuUsPerOp)],
  ]);
}

export function contendedTable(results: BenchResults, index: number): Table {
  const run = results.contended[index];
  return sideBySide(results, run.byLib, [
    ['acquisitions', (r) => String(r.acquisitions)],
    ['acquisitions/s', (r) => fmt(r.acquisitionsPerSec)],
    ['acquisitions/s, repeats min–max', (r) => `${fmt(Math.min(...r.acquisitionsPerSecRepeats))}–${fmt(Math.max(...r.acquisitionsPerSecRepeats))}`],
    ['wait p50 ms', (r) => fmtMs(r.waitP50)],
    ['wait p99 ms', (r) => fmtMs(r.waitP99)],
    ['wait max ms', (r) => fmtMs(r.waitMax)],
    ['handoff p50 ms', (r) => fmtMs(r.handoffP50)],
    ['handoff p99 ms', (r) => fmtMs(r.handoffP99)],
    ['re-acquired by releaser', (r) => fmtPct(r.reacquireShare)],
    ['acquisitions per worker min–max', (r) => `${Math.min(...r.perWorker)}–${Math.max(...r.perWorker)}`],
    ['library gave up (worker re-asked)', (r) => String(r.giveUps)],
    ['overlaps', (r) => String(r.overlaps)],
    ['round trips per acquisition', (r) => fmt(r.roundTripsPerAcq)],
    ['Redis commands per acquisition', (r) => fmt(r.commandsPerAcq)],
    ['Redis CPU µs per acquisition', (r) => fmt(r.cpuUsPerAcq, 0)],
    ['Redis bytes out per acquisition', (r) => fmt(r.server.outputBytes / r.acquisitions, 0)],
    ['pub/sub messages per acquisition', (r) => fmt(r.client.messagesReceived / r.acquisitions)],
  ]);
}

/** The (c) reference printed under its table: what a perfect handover costs Redis. */
export function handoverFloorLine(floor: HandoverFloorResult): string {
  return (
    `perfect-handover floor: ${fmt(floor.cpuUsPerAcq, 0)} µs Redis CPU per acquisition, ${fmt(floor.roundTripsPerAcq, 2)} round trips, ` +
    `${fmt(floor.commandsPerAcq, 1)} Redis commands (${floor.acquisitions} acquisitions; the same ${floor.workers} workers and ` +
    `${floor.sectionMs} ms section, an in-process oracle hands the key on: SET NX, hold, compare-and-delete, no waiting or polling; ` +
    `${floor.cpuUsPerAcqRepeats.length} repeats interleaved with the libraries': ${floor.cpuUsPerAcqRepeats.map((us) => fmt(us, 0)).join(' / ')} µs)`
  );
}

export function heldTable(results: BenchResults): Table {
  return sideBySide(results, results.held, [
    ['locks held', (r) => String(r.locks)],
    ['ttl ms / held for ms', (r) => `${r.ttl} / ${r.holdMs}`],
    ['taking all locks ms', (r) => fmt(r.acquireAllMs, 0)],
    ['renewals (script calls)', (r) => String(r.renewals)],
    ['renewal rounds (renewals / locks)', (r) => fmt(r.renewalRounds, 2)],
    ['round trips while held', (r) => String(r.roundTrips)],
    ['of which pipelines', (r) => String(r.pipelines)],
    ['round trips per renewal round (1 connection)', (r) => fmt(r.roundTripsPerRound, 1)],
    ['renewals per round trip', (r) => fmt(r.renewalsPerRoundTrip, 0)],
    ['heap bytes per held lock', (r) => fmt(r.heapBytesPerLock, 0)],
    ['event-loop delay p99 ms', (r) => fmtMs(r.eventLoopDelayP99Ms)],
    ['event-loop delay max ms', (r) => fmtMs(r.eventLoopDelayMaxMs)],
    ['Redis CPU µs per renewal', (r) => fmt(r.cpuUsPerRenewal)],
  ]);
}
