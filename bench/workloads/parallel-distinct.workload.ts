import type { LockAdapter } from '../adapters';
import { median, sumServer, sumTrips } from '../measure/aggregate';
import { withFreshServer } from '../measure/bench-server';
import { startClientCpu } from '../measure/client-cpu';
import { nowMs } from '../measure/clock';
import { RoundTripCounts, startRoundTripCount } from '../measure/round-trips';
import { ServerDelta, startServerDelta } from '../measure/redis-server-stats';

/** One round of (b) on a fresh server. */
export interface ParallelRound {
  ops: number;
  elapsedMs: number;
  clientCpuUs: number;
  client: RoundTripCounts;
  server: ServerDelta;
}

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
export async function runParallelRound(adapter: LockAdapter, ops: number, inFlight: number): Promise<ParallelRound> {
  return withFreshServer(async ({ url, admin }) => {
    const client = await adapter.create(url);
    try {
      const runLoops = async (total: number) => {
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
      await runLoops(inFlight * 4);
      const serverDelta = await startServerDelta(admin);
      const readTrips = startRoundTripCount();
      const readCpu = startClientCpu();
      const t0 = nowMs();
      await runLoops(ops);
      const elapsedMs = nowMs() - t0;
      const clientCpuUs = readCpu();
      const trips = readTrips();
      return { ops, elapsedMs, clientCpuUs, client: trips, server: await serverDelta() };
    } finally {
      await client.close();
    }
  });
}

export function summarizeParallel(rounds: readonly ParallelRound[], inFlight: number): ParallelResult {
  const ops = rounds.reduce((n, r) => n + r.ops, 0);
  const client = sumTrips(rounds.map((r) => r.client));
  const server = sumServer(rounds.map((r) => r.server));
  const opsPerSecRounds = rounds.map((r) => r.ops / (r.elapsedMs / 1000));
  return {
    ops,
    inFlight,
    rounds: rounds.length,
    opsPerSec: median(opsPerSecRounds),
    opsPerSecRounds,
    roundTripsPerOp: client.roundTrips / ops,
    commandsPerOp: server.commands / ops,
    cpuUsPerOp: server.cpuUs / ops,
    clientCpuUsPerOp: rounds.reduce((n, r) => n + r.clientCpuUs, 0) / ops,
    client,
    server,
  };
}
