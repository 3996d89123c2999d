import type { LockAdapter, LockClient } from '../adapters';
import { sumServer, sumTrips } from './aggregate';
import { BenchFixture, freshServer } from './bench-server';
import { startClientCpu } from './client-cpu';
import { nowMs } from './clock';
import { RoundTripCounts, startRoundTripCount } from './round-trips';
import type { ServerDelta } from './redis-server-stats';

/** What one measured round of an uncontended workload reports. */
export interface MeasuredRound {
  /** Acquire + release cycles measured. */
  units: number;
  elapsedMs: number;
  clientCpuUs: number;
  client: RoundTripCounts;
  server: ServerDelta;
}

/**
 * One round on a fresh server (or `fixture`'s servers): `warmUp` first (loads scripts — EVALSHA → NOSCRIPT → EVAL — and warms
 * the JIT), then `run` with round trips, client CPU and server INFO deltas counted around it only.
 */
export async function measuredRound(
  adapter: LockAdapter,
  units: number,
  warmUp: (client: LockClient) => Promise<void>,
  run: (client: LockClient) => Promise<void>,
  fixture: BenchFixture = freshServer,
): Promise<MeasuredRound> {
  return fixture(async ({ url, startDelta }) => {
    const client = await adapter.create(url);
    try {
      await warmUp(client);
      const serverDelta = await startDelta();
      const readTrips = startRoundTripCount();
      const readCpu = startClientCpu();
      const started = nowMs();
      await run(client);
      const elapsedMs = nowMs() - started;
      const clientCpuUs = readCpu();
      const trips = readTrips();
      return { units, elapsedMs, clientCpuUs, client: trips, server: await serverDelta() };
    } finally {
      await client.close();
    }
  });
}

/** Totals over rounds, and per-unit figures every uncontended workload reports. */
export function summarizeRounds(rounds: readonly MeasuredRound[]) {
  const units = rounds.reduce((n, r) => n + r.units, 0);
  const client = sumTrips(rounds.map((r) => r.client));
  const server = sumServer(rounds.map((r) => r.server));
  return {
    units,
    rounds: rounds.length,
    roundTripsPerUnit: client.roundTrips / units,
    commandsPerUnit: server.commands / units,
    cpuUsPerUnit: server.cpuUs / units,
    clientCpuUsPerUnit: rounds.reduce((n, r) => n + r.clientCpuUs, 0) / units,
    client,
    server,
  };
}
