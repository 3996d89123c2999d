import type { LockAdapter, LockClient } from '../adapters';
import { median } from '../measure/aggregate';
import type { BenchFixture } from '../measure/bench-server';
import { MeasuredRound, measuredRound, summarizeRounds } from '../measure/measured-round';
import type { RoundTripCounts } from '../measure/round-trips';
import type { ServerDelta } from '../measure/redis-server-stats';

/** One round of (b) on a fresh server. */
export type ParallelRound = MeasuredRound;

/** (b) over all rounds: throughput is the median round, counts are totals / ops. */
export interface ParallelResult {
  ops: number;
  inFlight: number;
  rounds: number;
  opsPerSec: number;
  opsPerSecRounds: number[];
  roundTripsPerOp: number;
  commandsPerOp: number;
  cpuUsPerOp: number;
  clientCpuUsPerOp: number;
  client: RoundTripCounts;
  server: ServerDelta;
}

/**
 * (b) One client (one instance), `inFlight` loops each on its own key, `ops` acquire + release in
 * total: throughput when nothing contends, all commands sharing one connection. Each key has
 * exactly one loop, so there is nothing to overlap here (mutual exclusion is checked in c).
 */
export function runParallelRound(adapter: LockAdapter, ops: number, inFlight: number, fixture?: BenchFixture): Promise<ParallelRound> {
  const runLoops = (total: number) => async (client: LockClient) => {
    let started = 0;
    const loop = async (slot: number) => {
      const key = `bench:b:${slot}`;
      while (started < total) {
        started++;
        const held = await client.acquire(key);
        if (!held) throw new Error(`${adapter.name}: uncontended acquire of ${key} gave up`);
        await held.release();
      }
    };
    await Promise.all(Array.from({ length: inFlight }, (_, slot) => loop(slot)));
  };
  return measuredRound(adapter, ops, runLoops(inFlight * 4), runLoops(ops), fixture);
}

export function summarizeParallel(rounds: readonly ParallelRound[], inFlight: number): ParallelResult {
  const totals = summarizeRounds(rounds);
  const opsPerSecRounds = rounds.map((r) => r.units / (r.elapsedMs / 1000));
  return {
    ops: totals.units,
    inFlight,
    rounds: totals.rounds,
    opsPerSec: median(opsPerSecRounds),
    opsPerSecRounds,
    roundTripsPerOp: totals.roundTripsPerUnit,
    commandsPerOp: totals.commandsPerUnit,
    cpuUsPerOp: totals.cpuUsPerUnit,
    clientCpuUsPerOp: totals.clientCpuUsPerUnit,
    client: totals.client,
    server: totals.server,
  };
}
