import type { LockAdapter, LockClient } from '../adapters';
import { median } from '../measure/aggregate';
import type { BenchFixture } from '../measure/bench-server';
import { MeasuredRound, measuredRound, summarizeRounds } from '../measure/measured-round';
import type { RoundTripCounts } from '../measure/round-trips';
import type { ServerDelta } from '../measure/redis-server-stats';

/** One round of (a) on a fresh server. */
export type SequentialRound = MeasuredRound;

/** (a) over all rounds: time is the median round (noise-robust), counts are totals / cycles. */
export interface SequentialResult {
  cycles: number;
  rounds: number;
  usPerCycle: number;
  usPerCycleRounds: number[];
  roundTripsPerCycle: number;
  commandsPerCycle: number;
  cpuUsPerCycle: number;
  /** Redis CPU µs per cycle of each round, in round order (for paired ratios). */
  cpuUsPerCycleRounds: number[];
  clientCpuUsPerCycle: number;
  client: RoundTripCounts;
  server: ServerDelta;
}

const WARMUP_CYCLES = 200;

/** (a) One client, one key, acquire + release back to back: the cost of the uncontended path. */
export function runSequentialRound(adapter: LockAdapter, cycles: number, fixture?: BenchFixture): Promise<SequentialRound> {
  const run = (count: number) => async (client: LockClient) => {
    for (let i = 0; i < count; i++) {
      const held = await client.acquire('bench:a');
      if (!held) throw new Error(`${adapter.name}: uncontended acquire gave up`);
      await held.release();
    }
  };
  return measuredRound(adapter, cycles, run(WARMUP_CYCLES), run(cycles), fixture);
}

export function summarizeSequential(rounds: readonly SequentialRound[]): SequentialResult {
  const totals = summarizeRounds(rounds);
  const usPerCycleRounds = rounds.map((r) => (r.elapsedMs * 1000) / r.units);
  return {
    cycles: totals.units,
    rounds: totals.rounds,
    usPerCycle: median(usPerCycleRounds),
    usPerCycleRounds,
    roundTripsPerCycle: totals.roundTripsPerUnit,
    commandsPerCycle: totals.commandsPerUnit,
    cpuUsPerCycle: totals.cpuUsPerUnit,
    cpuUsPerCycleRounds: rounds.map((r) => r.server.cpuUs / r.units),
    clientCpuUsPerCycle: totals.clientCpuUsPerUnit,
    client: totals.client,
    server: totals.server,
  };
}
