import { percentile } from './percentiles';
import type { RoundTripCounts } from './round-trips';
import type { ServerDelta } from './redis-server-stats';

export const median = (values: readonly number[]): number => percentile(values, 50);

/** Adds up round-trip counts of several runs. */
export function sumTrips(runs: readonly RoundTripCounts[]): RoundTripCounts {
  const total: RoundTripCounts = { roundTrips: 0, pipelines: 0, pipelinedCommands: 0, byCommand: {}, messagesReceived: 0 };
  for (const r of runs) {
    total.roundTrips += r.roundTrips;
    total.pipelines += r.pipelines;
    total.pipelinedCommands += r.pipelinedCommands;
    total.messagesReceived += r.messagesReceived;
    for (const [name, n] of Object.entries(r.byCommand)) total.byCommand[name] = (total.byCommand[name] ?? 0) + n;
  }
  return total;
}

/** Adds up server deltas of several runs. */
export function sumServer(runs: readonly ServerDelta[]): ServerDelta {
  const total: ServerDelta = { commands: 0, cpuUs: 0, outputBytes: 0, byCommand: {} };
  for (const r of runs) {
    total.commands += r.commands;
    total.cpuUs += r.cpuUs;
    total.outputBytes += r.outputBytes;
    for (const [name, n] of Object.entries(r.byCommand)) total.byCommand[name] = (total.byCommand[name] ?? 0) + n;
  }
  return total;
}
